"""The full-size test checkpoint's architecture against the published Qwen3.5-2B, from shapes alone."""

from __future__ import annotations

import torch
from transformers import Qwen3_5ForConditionalGeneration

from ocr_app.checkpoint import expected_head_shapes
from ocr_app.testing.full_size import PUBLISHED, QWEN_SPECIAL_TOKENS, VOCAB_SIZE, full_size_config, full_size_tokenizer, head_bytes


def test_config_and_head_match_the_published_checkpoint():
    config = full_size_config()
    with torch.device("meta"):
        model = Qwen3_5ForConditionalGeneration(config)
    # The tied lm_head is not stored in the published file.
    main = {name: t for name, t in model.state_dict().items() if name != "lm_head.weight"}
    head = expected_head_shapes(config.text_config)
    assert len(head) == PUBLISHED.head_tensors
    assert len(main) + len(head) == PUBLISHED.tensors
    parameters = sum(t.numel() for t in main.values()) + sum(torch.Size(s).numel() for s in head.values())
    assert parameters == PUBLISHED.parameters
    assert round(head_bytes(config) / 1e6) == PUBLISHED.head_megabytes
    assert head["mtp.fc.weight"] == (2048, 4096)


def test_tokenizer_has_the_real_size_and_special_ids():
    tokenizer = full_size_tokenizer()
    config = full_size_config()
    assert tokenizer.get_vocab_size() == VOCAB_SIZE == config.text_config.vocab_size
    for token, index in QWEN_SPECIAL_TOKENS.items():
        assert tokenizer.token_to_id(token) == index
    assert tokenizer.token_to_id("<|image_pad|>") == config.image_token_id
    assert "ğ" in tokenizer.decode(tokenizer.encode("Çağlar").ids)
