"""Rollback of the hybrid cache: after a verify pass with rejected drafts, every layer's state equals
the state of plain decoding of the accepted tokens alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import DynamicCache
from transformers.cache_utils import LinearAttentionCacheLayerMixin

from ocr_app.speculative.cache import ROLLBACKS
from ocr_app.speculative.decoder import SpeculativeDecoder, embed_prompt
from ocr_app.speculative.mtp_head import load_mtp_head

FED = [40, 41, 300, 7, 99, 250]  # last token + 5 drafts, arbitrary: the model decides nothing here


@pytest.fixture(scope="module")
def decoder(hf_engine, tiny_model_dir):
    return SpeculativeDecoder(hf_engine.model, load_mtp_head(tiny_model_dir, hf_engine.model), hf_engine.stop_token_ids)


@pytest.fixture(scope="module")
def prompt(hf_engine):
    pixels = np.random.default_rng(0).integers(0, 256, (160, 128, 3), dtype=np.uint8)
    with torch.inference_mode():
        return embed_prompt(hf_engine.model, hf_engine.page_inputs(Image.fromarray(pixels)))


def assert_same_cache(actual: DynamicCache, expected: DynamicCache) -> None:
    for index, (got, want) in enumerate(zip(actual.layers, expected.layers, strict=True)):
        if isinstance(want, LinearAttentionCacheLayerMixin):
            torch.testing.assert_close(got.conv_states[0], want.conv_states[0], msg=f"layer {index} conv state")
            torch.testing.assert_close(got.recurrent_states[0], want.recurrent_states[0], msg=f"layer {index} recurrent state")
        else:
            torch.testing.assert_close(got.keys, want.keys, msg=f"layer {index} keys")
            torch.testing.assert_close(got.values, want.values, msg=f"layer {index} values")


@pytest.mark.parametrize("strategy", sorted(ROLLBACKS))
@pytest.mark.parametrize("num_kept", [1, 2, 4, 6])
@torch.inference_mode()
def test_rollback_matches_plain_decoding(decoder, prompt, strategy, num_kept):
    prompt_length = prompt.embeds.shape[1]
    embeds = decoder._embed(FED)  # [1, 6, H]
    positions = decoder._positions(prompt_length, len(FED), prompt.rope_delta)  # [4, 1, 6]

    rollback = ROLLBACKS[strategy]()
    cache = rollback.new_cache(decoder.model)
    decoder._forward(prompt.embeds, prompt.positions, cache)
    rollback.after_prefill(cache)
    with rollback.verify_pass(cache):
        decoder._forward(embeds, positions, cache)
    rollback.keep(cache, len(FED), num_kept, lambda n: decoder._forward(embeds[:, :n], positions[..., :n], cache))

    plain = DynamicCache(config=decoder.model.config)
    decoder._forward(prompt.embeds, prompt.positions, plain)
    for step in range(num_kept):  # one token at a time, as plain decoding does
        decoder._forward(embeds[:, step : step + 1], positions[..., step : step + 1], plain)
    assert_same_cache(cache, plain)

    next_position = decoder._positions(prompt_length + num_kept, 1, prompt.rope_delta)
    next_embeds = decoder._embed([123])
    torch.testing.assert_close(
        decoder._forward(next_embeds, next_position, cache), decoder._forward(next_embeds, next_position, plain)
    )
