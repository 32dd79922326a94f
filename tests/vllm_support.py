"""Helpers shared by the vLLM tests: page images, and telling a real divergence from a bf16 near-tie."""

from __future__ import annotations

import os

import torch

from ocr_app.documents import open_document
from ocr_app.pages import iter_pages
from tests.conftest import PROJECT_ROOT, SAMPLE_PDF

# Small KV cache, no torch.compile, and vLLM's engine core in this process: on a
# busy 2-core machine a start then takes ~25 s instead of ~80 s (no processes
# re-importing torch), and a restart for another K ~10 s.
VLLM_TEST_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "OCR_APP_VLLM_EAGER": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    # Subprocesses import this checkout, not the installed one.
    "PYTHONPATH": str(PROJECT_ROOT),
}

# vLLM runs in bf16 (8-bit mantissa); the reference runs in fp32.  Two tokens whose
# fp32 logits are closer than this fraction of the logit range can swap places
# under bf16 rounding of the activations, with or without drafting.
NEAR_TIE_FRACTION = 0.02


def use_test_env() -> None:
    for name, value in VLLM_TEST_ENV.items():
        os.environ.setdefault(name, value)


def sample_page_images(preset, count: int = 2):
    document = open_document(SAMPLE_PDF, None)
    return [page.image for page in iter_pages(document, list(range(1, count + 1)), preset.pixels, 72)]


def first_divergence(a, b) -> int | None:
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def next_token_logits(hf_engine, image, output_prefix) -> torch.Tensor:
    """The fp32 main model's logits for the token after `output_prefix`."""
    inputs = hf_engine.page_inputs(image)
    prefix = torch.tensor([list(output_prefix)], dtype=inputs["input_ids"].dtype)
    input_ids = torch.cat([inputs["input_ids"], prefix], dim=1)  # [1, prompt + prefix]
    # Which tokens are image tokens, for the multimodal rotary positions; the output is text.
    token_types = torch.cat([inputs["mm_token_type_ids"], torch.zeros_like(prefix)], dim=1)  # [1, prompt + prefix]
    with torch.inference_mode():
        logits = hf_engine.model(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            mm_token_type_ids=token_types,
            pixel_values=inputs["pixel_values"],
            image_grid_thw=inputs["image_grid_thw"],
        ).logits
    return logits[0, -1]  # [V]


def assert_same_greedy_output(hf_engine, image, expected, actual) -> None:
    """Equal token ids, or a first difference at a near-tie of the main model's top two tokens.

    Anything else means drafting changed what the main model decides: a bug.
    """
    index = first_divergence(expected, actual)
    if index is None:
        return
    assert index < min(len(expected), len(actual)), "one output stopped early where the other went on"
    logits = next_token_logits(hf_engine, image, expected[:index])
    a, b = expected[index], actual[index]
    top_two = set(torch.topk(logits, 2).indices.tolist())
    gap = abs(logits[a] - logits[b]).item()
    scale = (logits.max() - logits.min()).item()
    assert {a, b} == top_two and gap <= NEAR_TIE_FRACTION * scale, (
        f"outputs part at token {index} ({a} vs {b}) with a logit gap of {gap:.4f} "
        f"(range {scale:.3f}): not a near-tie, drafting changed the text"
    )
