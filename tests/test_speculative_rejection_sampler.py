"""The verifier: greedy prefix acceptance, and the rejection sampler on hand-made p and q."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

from ocr_app.speculative.rejection_sampler import sampling_probs, verify_greedy, verify_sampling

VOCAB = 6


def one_hot_logits(token_ids: list[int]) -> torch.Tensor:  # [len, VOCAB], argmax = token
    logits = torch.full((len(token_ids), VOCAB), -5.0)
    logits[torch.arange(len(token_ids)), token_ids] = 5.0
    return logits


def one_hot(token_ids: list[int]) -> torch.Tensor:  # [len, VOCAB]
    return torch.nn.functional.one_hot(torch.tensor(token_ids), VOCAB).float()


# Greedy, crafted logits in the manner of vLLM's test_rejection_sampler.py


def test_perfect_match_accepts_all_and_adds_the_bonus():
    verdict = verify_greedy([1, 2, 3], one_hot_logits([1, 2, 3, 4]))
    assert (verdict.num_accepted, verdict.next_token) == (3, 4)
    assert verdict.tokens([1, 2, 3]) == [1, 2, 3, 4]


def test_early_mismatch_keeps_the_main_models_token():
    verdict = verify_greedy([1, 2, 3], one_hot_logits([1, 5, 3, 4]))
    assert verdict.tokens([1, 2, 3]) == [1, 5]


def test_first_token_mismatch_emits_one_token():
    verdict = verify_greedy([1, 2, 3], one_hot_logits([0, 2, 3, 4]))
    assert verdict.tokens([1, 2, 3]) == [0]


def test_agreement_after_a_mismatch_is_not_accepted():
    verdict = verify_greedy([1, 2, 3, 4], one_hot_logits([1, 0, 3, 4, 5]))
    assert (verdict.num_accepted, verdict.next_token) == (1, 0)


def test_no_drafts_is_a_plain_greedy_step():
    assert verify_greedy([], one_hot_logits([4])).tokens([]) == [4]


# Sampling


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9), (1.3, 0.5), (0.5, 0.05)])
def test_sampling_probs_equal_transformers_warpers(temperature, top_p):
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0)) * 3
    warped = TopPLogitsWarper(top_p)(None, TemperatureLogitsWarper(temperature)(None, logits.clone()))
    torch.testing.assert_close(sampling_probs(logits, temperature, top_p), warped.softmax(-1))


def test_p_equal_q_always_accepts():
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.0, 0.0]] * 4)
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        drafts = torch.multinomial(probs[:3], 1, generator=generator).view(-1).tolist()
        assert verify_sampling(drafts, probs[:3], probs, generator).num_accepted == 3


def test_draft_with_q_zero_and_p_positive_is_accepted():
    p = torch.tensor([[0.0, 0.5, 0.5, 0.0, 0.0, 0.0], [0, 0, 0, 1.0, 0, 0]])
    q = torch.tensor([[1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    for seed in range(50):
        assert verify_sampling([1], q, p, torch.Generator().manual_seed(seed)).tokens([1]) == [1, 3]


def test_draft_the_main_model_never_says_is_always_rejected_for_the_residual():
    p = torch.tensor([[0.0, 0.25, 0.75, 0.0, 0.0, 0.0], [0, 0, 0, 1.0, 0, 0]])
    q = torch.tensor([[0.5, 0.5, 0.0, 0.0, 0.0, 0.0]])
    seen = {verify_sampling([0], q, p, torch.Generator().manual_seed(seed)).tokens([0])[0] for seed in range(100)}
    assert seen == {2}  # residual max(0, p - q) = [0, 0, 0.75, 0...]: token 1 is covered by q, only 2 is left


def test_one_hot_draft_equal_to_target_is_a_perfect_match():
    verdict = verify_sampling([1, 2], one_hot([1, 2]), one_hot([1, 2, 5]), torch.Generator().manual_seed(0))
    assert verdict.tokens([1, 2]) == [1, 2, 5]


def test_one_hot_draft_unlike_target_is_an_early_mismatch():
    verdict = verify_sampling([1, 2], one_hot([1, 2]), one_hot([1, 4, 5]), torch.Generator().manual_seed(0))
    assert verdict.tokens([1, 2]) == [1, 4]


def total_variation(samples: torch.Tensor, probs: torch.Tensor) -> float:
    empirical = torch.bincount(samples, minlength=probs.numel()).float() / samples.numel()
    return 0.5 * float((empirical - probs).abs().sum())


def test_emitted_tokens_follow_p_whatever_q_is():
    """Two positions: the first emitted token ~ p_0, and given it was the accepted draft, the second ~ p_1."""
    generator = torch.Generator().manual_seed(1234)
    p = torch.tensor([[0.05, 0.45, 0.2, 0.3, 0.0, 0.0], [0.6, 0.1, 0.1, 0.1, 0.1, 0.0]])
    q = torch.tensor([[0.5, 0.1, 0.0, 0.2, 0.2, 0.0]])
    first, second = [], []
    for _ in range(20_000):
        draft = int(torch.multinomial(q[0], 1, generator=generator))
        tokens = verify_sampling([draft], q, p, generator).tokens([draft])
        first.append(tokens[0])
        if len(tokens) == 2:
            second.append(tokens[1])
    assert total_variation(torch.tensor(first), p[0]) < 0.015
    assert total_variation(torch.tensor(second), p[1]) < 0.02
