"""Verification: which draft tokens the main model accepts, and its bonus token.

Greedy: accept while the draft equals the main model's argmax; the bonus is the
argmax after the accepted prefix.  Sampling (Leviathan et al. 2023, as vLLM's
rejection sampler): accept draft d_j with probability min(1, p_j(d_j) / q_j(d_j));
at the first rejection sample from the residual max(0, p_j - q_j), normalised;
if all K are accepted sample the bonus from p_K.  Each emitted token is then
distributed exactly as the main model's p, whatever the head proposed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Verdict:
    num_accepted: int  # accepted draft tokens, 0..K
    next_token: int  # the bonus: main model's own token after the accepted prefix

    def tokens(self, draft_ids: list[int]) -> list[int]:
        return [*draft_ids[: self.num_accepted], self.next_token]


def sampling_probs(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:  # [..., V] -> [..., V]
    """Temperature then top-p, with the same cut as transformers' TopPLogitsWarper (so drafts 0 and
    drafts > 0 sample the same distribution): drop the least likely tokens whose cumulative
    probability stays <= 1 - top_p, always keeping the most likely one."""
    scaled = logits.float() / temperature
    if top_p < 1.0:
        sorted_logits, sorted_ids = torch.sort(scaled, dim=-1, descending=False)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        drop_sorted = cumulative <= 1 - top_p
        drop_sorted[..., -1] = False
        drop = drop_sorted.scatter(-1, sorted_ids, drop_sorted)
        scaled = scaled.masked_fill(drop, float("-inf"))
    return scaled.softmax(dim=-1)


def verify_greedy(draft_ids: list[int], target_logits: torch.Tensor) -> Verdict:
    """target_logits: [K+1, V], row j = main model after the prefix + j draft tokens."""
    target_ids = target_logits.argmax(dim=-1).tolist()  # [K+1]
    accepted = 0
    while accepted < len(draft_ids) and draft_ids[accepted] == target_ids[accepted]:
        accepted += 1
    return Verdict(accepted, target_ids[accepted])


def verify_sampling(
    draft_ids: list[int],
    draft_probs: torch.Tensor,  # [K, V] q_j, the distributions the drafts were sampled from
    target_probs: torch.Tensor,  # [K+1, V] p_j
    generator: torch.Generator | None = None,
) -> Verdict:
    for j, draft in enumerate(draft_ids):
        p, q = target_probs[j, draft], draft_probs[j, draft]
        uniform = torch.rand((), generator=generator, device=target_probs.device)
        # u < p/q written as u * q < p: q = 0 cannot occur for a sampled draft, but this stays exact if it does.
        if uniform * q < p:
            continue
        residual = (target_probs[j] - draft_probs[j]).clamp_min(0)  # [V]
        # residual sums to 0 only when p == q, where the draft is always accepted; guard float round-off.
        if residual.sum() <= 0:
            residual = target_probs[j]
        return Verdict(j, int(torch.multinomial(residual, 1, generator=generator)))
    return Verdict(len(draft_ids), int(torch.multinomial(target_probs[len(draft_ids)], 1, generator=generator)))
