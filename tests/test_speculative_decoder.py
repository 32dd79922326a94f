"""The speculative decoder is lossless: greedy output equals plain greedy decoding, sampled output
has the main model's distribution, and a head that predicts the model exactly is always accepted.

The reference is transformers' own `generate` (the hf engine with drafts 0), which shares no code
with the decoder.  The stock tiny random model has tied embeddings and repeats one token forever,
so the equality test uses a variant with a random untied lm_head, whose output varies.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file, save_file
from transformers import Qwen3_5ForConditionalGeneration

from ocr_app.checkpoint import write_weight_index
from ocr_app.config import load_model_preset
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.engines.hf import HFEngine
from ocr_app.speculative.decoder import SpeculativeDecoder

MAX_TOKENS = 12
MIXER_GAIN = 10.0  # louder token mixers in the varied model
STOP_SCALE = 0.7  # quieter stop tokens in it: most pages run to MAX_TOKENS, a few stop early
NEAR_TIE = 1e-3  # fp32 logits: reordering sums moves them by ~1e-6, never more than this


def untied_variant(source: Path, target: Path, lm_head_std: float, mixer_gain: float, seed: int) -> Path:
    """The same model with a random, untied lm_head (varied greedy output instead of one repeated token),
    louder token mixers and long-memory DeltaNet layers: at init the mixers are too faint and the
    recurrent state decays too fast to change a token, so a wrong cache state would go unnoticed."""
    shutil.copytree(source, target)
    model = Qwen3_5ForConditionalGeneration.from_pretrained(target, dtype=torch.float32)
    model.config.tie_word_embeddings = model.config.text_config.tie_word_embeddings = False
    generator = torch.Generator().manual_seed(seed)
    model.lm_head.weight = torch.nn.Parameter(torch.randn(model.lm_head.weight.shape, generator=generator) * lm_head_std)
    with torch.no_grad():
        text_config = model.config.text_config
        model.lm_head.weight[[text_config.eos_token_id, text_config.pad_token_id]] *= STOP_SCALE  # fewer empty pages
        for layer in model.model.language_model.layers:
            mixer = layer.self_attn.o_proj if hasattr(layer, "self_attn") else layer.linear_attn.out_proj
            mixer.weight.mul_(mixer_gain)
            if hasattr(layer, "linear_attn"):  # slow decay: the recurrent state remembers, so it must be right
                layer.linear_attn.A_log.fill_(math.log(0.05))
    model.save_pretrained(target)
    write_weight_index(target)
    return target


def noisy_head_variant(source: Path, target: Path, noise: float, seed: int) -> Path:
    """The predictable model with noise on its exact head: drafts are right only part of the time."""
    shutil.copytree(source, target)
    head = load_file(target / "mtp.safetensors")
    generator = torch.Generator().manual_seed(seed)
    head["mtp.fc.weight"] = head["mtp.fc.weight"] + torch.randn(head["mtp.fc.weight"].shape, generator=generator) * noise
    save_file(head, target / "mtp.safetensors")
    return target


@pytest.fixture(scope="module")
def varied_engine(tiny_model_dir, tmp_path_factory):
    folder = untied_variant(
        tiny_model_dir, tmp_path_factory.mktemp("models") / "varied", lm_head_std=0.5, mixer_gain=MIXER_GAIN, seed=0
    )
    return HFEngine(load_model_preset(folder))


@pytest.fixture(scope="module")
def predictable_engine(predictable_model_dir):
    return HFEngine(load_model_preset(predictable_model_dir))


@pytest.fixture(scope="module")
def mixed_engine(predictable_model_dir, tmp_path_factory):
    folder = noisy_head_variant(predictable_model_dir, tmp_path_factory.mktemp("models") / "mixed", noise=0.2, seed=0)
    return HFEngine(load_model_preset(folder))


def page_images(count: int) -> list[Image.Image]:
    """Small pages of different sizes and content: noise, stripes and blocks."""
    images = []
    for index in range(count):
        rng = np.random.default_rng(index)
        height, width = 32 * rng.integers(4, 8, size=2)
        pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        if index % 3 == 1:
            pixels[:, :: rng.integers(2, 9)] = 255
        elif index % 3 == 2:
            pixels[: height // 2] = rng.integers(0, 256, 3, dtype=np.uint8)
        images.append(Image.fromarray(pixels))
    return images


def greedy(drafts: int) -> GenerationSettings:
    return GenerationSettings(max_tokens=MAX_TOKENS, drafts=drafts)


def top2_gap_after(engine: HFEngine, image: Image.Image, prefix: list[int]) -> float:
    """Main model's top-1 minus top-2 logit after prompt + prefix, from one uncached forward."""
    inputs = engine.page_inputs(image)
    extra = torch.tensor([prefix], dtype=inputs["input_ids"].dtype)
    inputs["input_ids"] = torch.cat([inputs["input_ids"], extra], dim=1)
    inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    inputs["mm_token_type_ids"] = torch.cat([inputs["mm_token_type_ids"], torch.zeros_like(extra)], dim=1)
    with torch.no_grad():
        top2 = engine.model(**inputs).logits[0, -1].topk(2).values
    return float(top2[0] - top2[1])


def assert_same_or_near_tie(engine: HFEngine, image, reference, output, label: str) -> None:
    expected = [*reference.token_ids, "stop"] if reference.metrics.finish_reason == "stop" else list(reference.token_ids)
    got = [*output.token_ids, "stop"] if output.metrics.finish_reason == "stop" else list(output.token_ids)
    if got == expected:
        return
    first = next(i for i, (a, b) in enumerate(zip(expected, got)) if a != b)
    gap = top2_gap_after(engine, image, list(reference.token_ids[:first]))
    assert gap < NEAR_TIE, f"{label}: differs from plain greedy at token {first} with a top-2 logit gap of {gap:.3g}"


@pytest.fixture(scope="module")
def greedy_references(varied_engine):
    """50 pages and what plain greedy decoding reads from each."""
    images = page_images(50)
    return [(image, varied_engine.read(image, greedy(0))) for image in images]


@pytest.mark.parametrize("drafts", range(1, 8))
def test_greedy_output_equals_plain_greedy(varied_engine, greedy_references, drafts):
    for index, (image, reference) in enumerate(greedy_references):
        output = varied_engine.read(image, greedy(drafts))
        assert_same_or_near_tie(varied_engine, image, reference, output, f"page {index}, K={drafts}")
        assert (output.metrics.spec.num_drafts > 0) == (output.metrics.output_tokens > 1)


@pytest.mark.parametrize("drafts", range(1, 8))
def test_exact_head_is_always_accepted(predictable_engine, drafts):
    for image in page_images(2):
        reference = predictable_engine.read(image, greedy(0))
        output = predictable_engine.read(image, greedy(drafts))
        assert output.token_ids == reference.token_ids
        stats = output.metrics.spec
        assert stats.num_draft_tokens > 0 and stats.num_accepted_tokens == stats.num_draft_tokens
        assert stats.accepted_per_position[0] == stats.num_drafts


@pytest.mark.parametrize("drafts", [3, 5])
def test_drafts_after_an_accepted_stop_token_are_not_counted(predictable_engine, drafts):
    """The exact head drafts past the page's end too (the main model's argmax after its stop token), and the
    verify pass agrees: those drafts never reach the text, so they count neither as accepted nor as rejected.
    Every counted acceptance is then an emitted token: after the prefill's token, each round emits its
    accepted drafts and a bonus token, except a round ended by an accepted stop token, which has no bonus."""
    head = predictable_engine._speculative_decoder().head
    prompt = predictable_engine.processor.tokenizer(["Fatura No:"], return_tensors="pt")
    reference = SpeculativeDecoder(predictable_engine.model, head, stop_token_ids=[]).generate(prompt, greedy(0)).token_ids
    stops_inside_a_round = 0
    for index, stop in enumerate(reference[1:], start=1):
        if stop in reference[:index]:
            continue  # the page would end at its first occurrence
        output = SpeculativeDecoder(predictable_engine.model, head, stop_token_ids=[stop]).generate(prompt, greedy(drafts))
        assert output.token_ids == reference[: index + 1]
        stats, rounds = output.stats, sum(output.rounds_by_k.values())
        assert stats.num_accepted_tokens == stats.num_draft_tokens  # the head is exact
        emitted = len(output.token_ids) - 1
        assert stats.num_accepted_tokens in (emitted - rounds, emitted - rounds + 1)
        stops_inside_a_round += stats.num_accepted_tokens == emitted - rounds + 1
    assert stops_inside_a_round  # the case that matters came up


def test_partly_right_head_keeps_the_output(mixed_engine):
    """Acceptance strictly between none and all: rounds end at different lengths."""
    for image in page_images(2):
        reference = mixed_engine.read(image, greedy(0))
        for drafts in range(1, 8):
            output = mixed_engine.read(image, greedy(drafts))
            assert output.token_ids == reference.token_ids
            stats = output.metrics.spec
            assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens


# Sampling: the first tokens of many seeded runs against the main model's exact distribution.

TEMPERATURE, TOP_P, SAMPLES = 4.0, 0.8, 1200


def exact_marginals(engine: HFEngine, prompt_ids: torch.Tensor) -> list[torch.Tensor]:
    """Distributions of the first and second sampled token under the main model alone (drafts 0),
    with transformers' own temperature and top-p warpers."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    def next_probs(sequences: torch.Tensor) -> torch.Tensor:  # [N, L] -> [N, V]
        with torch.no_grad():
            logits = engine.model(input_ids=sequences, attention_mask=torch.ones_like(sequences)).logits[:, -1]
        return TopPLogitsWarper(TOP_P)(None, TemperatureLogitsWarper(TEMPERATURE)(None, logits)).softmax(-1)

    first = next_probs(prompt_ids)[0]  # [V]
    support = first.nonzero().view(-1)
    continued = torch.cat([prompt_ids.expand(len(support), -1), support.view(-1, 1)], dim=1)
    second = first[support] @ next_probs(continued)  # [V]
    return [first, second]


def chi_square_p_value(samples: list[int], probs: torch.Tensor) -> float:
    """Goodness of fit; tokens expected fewer than 5 times are pooled into one bin."""
    observed = torch.bincount(torch.tensor(samples), minlength=probs.numel()).double()
    expected = probs.double() * len(samples)
    common = expected >= 5
    observed = torch.cat([observed[common], observed[~common].sum().view(1)])
    expected = torch.cat([expected[common], expected[~common].sum().view(1)])
    statistic = float(((observed - expected) ** 2 / expected.clamp_min(1e-12)).sum())
    degrees = len(expected) - 1
    return float(torch.special.gammaincc(torch.tensor(degrees / 2), torch.tensor(statistic / 2)))


def test_sampled_tokens_follow_the_main_models_distribution(mixed_engine):
    """K=2, 3 tokens: the first is sampled after the prefill, the second is an accepted draft or a
    residual sample, the third a bonus; the head is right often enough (~10%) for both paths to matter."""
    decoder = SpeculativeDecoder(mixed_engine.model, mixed_engine._speculative_decoder().head, stop_token_ids=[])
    prompt = mixed_engine.processor.tokenizer(["Fatura No:"], return_tensors="pt")
    settings = [
        GenerationSettings(max_tokens=3, drafts=2, temperature=TEMPERATURE, top_p=TOP_P, seed=seed) for seed in range(SAMPLES)
    ]
    runs = [decoder.generate(prompt, setting) for setting in settings]
    accepted = sum(run.stats.num_accepted_tokens for run in runs)
    assert 0 < accepted < SAMPLES
    for position, probs in enumerate(exact_marginals(mixed_engine, prompt["input_ids"])):
        p_value = chi_square_p_value([run.token_ids[position] for run in runs], probs)
        assert p_value > 1e-3, f"token {position}: p = {p_value:.2g}"
