"""Timing what a round of speculative decoding costs on this device, for `--drafts auto` (`auto.DraftCosts`)
and the drafting benchmarks (`benchmarking.hf_forward_cost`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch
from PIL import Image
from transformers import DynamicCache

from ocr_app.config import ModelPreset
from ocr_app.speculative.auto import DraftCosts
from ocr_app.speculative.cache import ROLLBACKS
from ocr_app.speculative.decoder import SpeculativeDecoder, embed_prompt

CALIBRATION_TOKENS = (1, 2, 4, 8)  # T of the timed verify passes; verify(K+1) for K <= 7 interpolates


def _timed(run: Callable[[], object], repeats: int, synchronize: Callable[[], None],
           reset: Callable[[], object] = lambda: None) -> float:
    """Median seconds of `run()`, with `reset()` after each (not timed)."""
    samples = []
    for _ in range(repeats):
        synchronize()
        started = time.perf_counter()
        run()
        synchronize()
        samples.append(time.perf_counter() - started)
        reset()
    return statistics.median(samples)


@torch.inference_mode()
def calibrate(decoder: SpeculativeDecoder, inputs: dict[str, torch.Tensor], repeats: int = 5,
              token_counts: Sequence[int] = CALIBRATION_TOKENS) -> DraftCosts:
    """Median seconds of one verify pass over T new tokens after the prompt of `inputs` (the main-model
    forward as a round runs it, under the decoder's cache rollback), for each T, and of one head step after
    the prompt's pairs.  After each pass the cache keeps one of the T
    tokens, as a round that accepts nothing does, so the length barely moves."""
    model, head = decoder.model, decoder.head
    synchronize = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)
    rollback = ROLLBACKS[decoder.rollback_name]()
    prompt = embed_prompt(model, inputs)
    cache = rollback.new_cache(model)
    hidden = decoder._forward(prompt.embeds, prompt.positions, cache)  # [1, L, H]
    rollback.after_prefill(cache)
    length = prompt.embeds.shape[1]
    verify_s = {}
    for tokens in token_counts:
        fed: dict[str, torch.Tensor] = {}

        def verify() -> None:
            fed["embeds"] = decoder._embed(list(range(10, 10 + tokens)))
            fed["positions"] = decoder._positions(length, tokens, prompt.rope_delta)
            with rollback.verify_pass(cache):
                decoder._forward(fed["embeds"], fed["positions"], cache)

        def keep_one() -> None:
            nonlocal length
            rollback.keep(cache, tokens, 1, lambda n: decoder._forward(fed["embeds"][:, :n], fed["positions"][..., :n], cache))
            length += 1

        verify_s[tokens] = _timed(verify, repeats, synchronize, keep_one)
    head_cache = DynamicCache()
    head_hidden = head(prompt.embeds[:, 1:], hidden[:, :-1], prompt.positions[1:, :, :-1], head_cache)[:, -1:]
    step_embeds = decoder._embed([10])
    step_positions = prompt.positions[1:, :, -1:]

    def head_step() -> None:
        head.logits(head(step_embeds, head_hidden, step_positions, head_cache)[0, -1]).argmax()

    return DraftCosts(verify_s, _timed(head_step, repeats, synchronize, lambda: head_cache.crop(-1)))


def dummy_page(model: ModelPreset) -> Image.Image:
    """A blank page of the smallest size the pixel budget allows: the real shapes, a short prompt."""
    side = max(model.pixels.factor, int(model.pixels.min_pixels ** 0.5))
    return Image.new("RGB", (side, side), "white")
