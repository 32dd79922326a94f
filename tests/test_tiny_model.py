"""The offline test model: real Hugging Face layout, deterministic, small, head indexed."""

from __future__ import annotations

import hashlib
import json

from transformers import AutoConfig, AutoProcessor

from ocr_app.checkpoint import HEAD_FILE, INDEX_NAME, inspect_mtp_head
from ocr_app.testing.tiny_model import build_tiny_model


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_layout_and_head(tiny_model_dir):
    config = AutoConfig.from_pretrained(tiny_model_dir)
    assert config.model_type == "qwen3_5"
    assert config.text_config.linear_key_head_dim == 128  # what vLLM's CPU Gated DeltaNet needs
    index = json.loads((tiny_model_dir / INDEX_NAME).read_text())["weight_map"]
    head_tensors = [name for name, file in index.items() if file == HEAD_FILE]
    assert head_tensors and all(name.startswith("mtp.") for name in head_tensors)
    assert inspect_mtp_head(tiny_model_dir, config.text_config).usable
    total = sum(p.stat().st_size for p in tiny_model_dir.iterdir())
    assert total < 10 * 1024 * 1024


def test_processor_has_qwen_vision_tokens(tiny_model_dir):
    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    vocab = processor.tokenizer.get_vocab()
    for token in ("<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|image_pad|>", "<|vision_end|>"):
        assert token in vocab
    assert "ğ" in processor.tokenizer.decode(processor.tokenizer("Çağlar")["input_ids"])


def test_same_seed_same_bytes(tmp_path, tiny_model_dir):
    again = build_tiny_model(tmp_path / "again", seed=0)
    for name in ("model.safetensors", HEAD_FILE, "tokenizer.json"):
        assert digest(again / name) == digest(tiny_model_dir / name)
