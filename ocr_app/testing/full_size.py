"""A random-weight checkpoint with the exact architecture of Qwen3.5-2B, built offline.

    python -m ocr_app.testing.full_size OUT_DIR [--predictable] [--seed 0]

Nothing in the repository can download the real model, yet what breaks only at
size (a 248 320-token vocabulary in the head's `lm_head`, the vision tower's
image tokens against `max_model_len`, a ~4.5 GB checkpoint with a 122 MB
`mtp.safetensors` beside it) must be exercised.  This folder has the real
shapes with random bf16 weights, a byte-level BPE padded to the real vocabulary
with the Qwen special tokens at their real ids, the processor configs, an MTP
head in `mtp.safetensors` listed by the index, and the `qwen3.5-2b-ocr-tr`
preset as its own `ocr_app.toml`.

Where the numbers come from (checked on 2 Dec 2026):
- text: hidden 2048, 24 layers (every 4th full attention), MLP 6144, 8 heads / 2 KV heads of dim 256,
  16 linear key and value heads of dim 128, vocab 248 320, tied embeddings, one MTP layer: the 2B config
  quoted by public repositories (e.g. a model-contract test asserting "the certified 2B architecture":
  hidden 2048, 24 layers, 8/2 heads, MLP 6144, vocab 248 320; a Swift config-to-IR test with the same
  text config and its linear-attention heads), the layer pattern, rope and token ids as in Qwen3.5-0.8B's
  config.json (mrope_section [11, 11, 10], rope_theta 1e7, image/video/vision start/end ids
  248056/248057/248053/248054, eos 248044/248046);
- vision: depth 24, width 1024, MLP 4096, 16 heads, merger to 2048 (Qwen3-VL-2B's tower);
- the published safetensors header of Qwen/Qwen3.5-2B (KinChow/model-structure-viewer,
  models/Qwen/Qwen3.5-2B/header-truth.json): 632 tensors, 15 of them `mtp.*`, 2 274 069 824 parameters.
  This configuration gives exactly those counts (`PUBLISHED`, checked by tests/test_full_size.py), and
  its head is 60 828 160 bf16 parameters = 121.7 MB, the published 122 MB head file.
The published file keeps 2 592 parameters (each linear-attention layer's A_log and gated norm) in
float32; here every tensor is bf16, so the folder is 5 184 bytes smaller.
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

from ocr_app.checkpoint import expected_head_shapes, write_weight_index
from ocr_app.config import FOLDER_PRESET_NAME, configs_dir
from ocr_app.testing.tiny_model import make_predictable, random_mtp_head, train_tokenizer, write_processor

SHAPE_NAME = "qwen3.5-2b"
PRESET_NAME = "qwen3.5-2b-ocr-tr"

VOCAB_SIZE = 248_320
# Qwen's special tokens at their ids in Qwen3.5's tokenizer (the same order as Qwen2.5's, from 248044).
QWEN_SPECIAL_TOKENS = {
    "<|endoftext|>": 248_044,
    "<|im_start|>": 248_045,
    "<|im_end|>": 248_046,
    "<|object_ref_start|>": 248_047,
    "<|object_ref_end|>": 248_048,
    "<|box_start|>": 248_049,
    "<|box_end|>": 248_050,
    "<|quad_start|>": 248_051,
    "<|quad_end|>": 248_052,
    "<|vision_start|>": 248_053,
    "<|vision_end|>": 248_054,
    "<|vision_pad|>": 248_055,
    "<|image_pad|>": 248_056,
    "<|video_pad|>": 248_057,
}

TEXT_CONFIG = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=24,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=256,
    linear_num_key_heads=16,
    linear_num_value_heads=16,
    linear_key_head_dim=128,
    linear_value_head_dim=128,
    linear_conv_kernel_dim=4,
    layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(24)],
    max_position_embeddings=262_144,
    rope_parameters={
        "rope_type": "default",
        "rope_theta": 10_000_000,
        "partial_rotary_factor": 0.25,
        "mrope_section": [11, 11, 10],
        "mrope_interleaved": True,
    },
    rms_norm_eps=1e-6,
    attn_output_gate=True,
    mtp_num_hidden_layers=1,
    mtp_use_dedicated_embeddings=False,
    eos_token_id=QWEN_SPECIAL_TOKENS["<|im_end|>"],
    pad_token_id=QWEN_SPECIAL_TOKENS["<|endoftext|>"],
    dtype="bfloat16",
)
VISION_CONFIG = dict(
    depth=24,
    hidden_size=1024,
    intermediate_size=4096,
    num_heads=16,
    patch_size=16,
    spatial_merge_size=2,
    temporal_patch_size=2,
    out_hidden_size=2048,
    num_position_embeddings=2304,
    deepstack_visual_indexes=[],
)
# Qwen3.5's published preprocessor budget (its processor default; presets narrow it per read).
MIN_PIXELS, MAX_PIXELS = 65_536, 16_777_216


@dataclass(frozen=True)
class Published:
    """Counts of the published Qwen/Qwen3.5-2B safetensors (header only) and its head file."""

    tensors: int = 632
    head_tensors: int = 15
    parameters: int = 2_274_069_824
    head_megabytes: int = 122


PUBLISHED = Published()


def full_size_config(tie_word_embeddings: bool = True) -> Qwen3_5Config:
    ids = QWEN_SPECIAL_TOKENS
    return Qwen3_5Config(
        text_config={**TEXT_CONFIG, "tie_word_embeddings": tie_word_embeddings},
        vision_config=VISION_CONFIG,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=tie_word_embeddings,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )


def head_bytes(config: Qwen3_5Config, bytes_per_parameter: int = 2) -> int:
    """Size of the bf16 `mtp.*` tensors of a head for `config`, from shapes alone."""
    return sum(bytes_per_parameter * torch.Size(shape).numel() for shape in expected_head_shapes(config.text_config).values())


def _filler_tokens(taken: set[str]):
    """Distinct byte-level strings (" abc", "abcd", ...) that pad the vocabulary: a random model's
    output over them decodes to readable nonsense rather than empty strings."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    for length in itertools.count(2):
        for prefix in ("Ġ", ""):
            for combo in itertools.product(letters, repeat=length):
                token = prefix + "".join(combo)
                if token not in taken:
                    yield token


def full_size_tokenizer() -> Tokenizer:
    """A byte-level BPE trained here, padded with filler tokens to exactly VOCAB_SIZE entries,
    the Qwen special tokens at their real ids."""
    trained = json.loads(train_tokenizer(vocab_size=4096).to_str())["model"]
    ordinary = [token for token, _ in sorted(trained["vocab"].items(), key=lambda item: item[1])]
    ordinary = [token for token in ordinary if token not in QWEN_SPECIAL_TOKENS]
    fillers = _filler_tokens(set(ordinary))
    by_id = {index: token for token, index in QWEN_SPECIAL_TOKENS.items()}
    ordinary_iter = iter(ordinary)
    vocab: dict[str, int] = {}
    for index in range(VOCAB_SIZE):
        token = by_id.get(index) or next(ordinary_iter, None) or next(fillers)
        vocab[token] = index
    merges = [tuple(merge) if isinstance(merge, list) else tuple(merge.split(" ")) for merge in trained["merges"]]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(list(QWEN_SPECIAL_TOKENS))
    return tokenizer


def build_full_size_model(out_dir: Path, seed: int = 0, predictable: bool = False) -> Path:
    """Write the full-size checkpoint folder (~4.5 GB; ~5.5 GB predictable, whose lm_head is untied)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    config = full_size_config(tie_word_embeddings=not predictable)
    model = Qwen3_5ForConditionalGeneration._from_config(config, dtype=torch.bfloat16).eval()
    head = {name: tensor.to(torch.bfloat16) for name, tensor in random_mtp_head(config).items()}
    if predictable:
        permutation = make_predictable(model, head, seed, special_ids=list(QWEN_SPECIAL_TOKENS.values()))
        (out_dir / "next_token_permutation.json").write_text(json.dumps(permutation))
    model.save_pretrained(out_dir, safe_serialization=True)
    del model
    save_file({k: v.contiguous() for k, v in head.items()}, out_dir / "mtp.safetensors")
    write_weight_index(out_dir)
    write_processor(
        out_dir,
        full_size_tokenizer(),
        MIN_PIXELS,
        MAX_PIXELS,
        special_tokens=list(QWEN_SPECIAL_TOKENS),
        model_max_length=TEXT_CONFIG["max_position_embeddings"],
    )
    # The real model's preset as the folder's own: `--model DIR` reads it as the target would be read.
    (out_dir / FOLDER_PRESET_NAME).write_bytes((configs_dir() / "models" / f"{PRESET_NAME}.toml").read_bytes())
    return out_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--predictable", action="store_true", help="an MTP head that drafts exactly what the model says")
    args = parser.parse_args()
    print(build_full_size_model(args.out_dir, seed=args.seed, predictable=args.predictable))


if __name__ == "__main__":
    main()
