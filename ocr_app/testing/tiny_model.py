"""Write a tiny random-weight Qwen3.5 vision-language checkpoint, offline.

    python -m ocr_app.testing.tiny_model OUT_DIR [--seed 0] [--predictable]
    python -m ocr_app.testing.full_size OUT_DIR [--predictable]   # the real model's size

The folder has the real Hugging Face layout (config.json with model_type
`qwen3_5`, model.safetensors, a byte-level BPE tokenizer trained here with the
Qwen chat/vision special tokens, processor configs) plus an MTP head in the
Qwen3.5 checkpoint layout, stored in its own `mtp.safetensors` and listed in
`model.safetensors.index.json`, exactly as a shipped head is.  The sizes meet
what vLLM on CPU needs for the Gated DeltaNet layers (`linear_key_head_dim`
128, bf16 at run time).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3_5Config, Qwen3_5ForConditionalGeneration, Qwen3VLProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

from ocr_app.checkpoint import write_weight_index
from ocr_app.config import FOLDER_PRESET_NAME, configs_dir

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# A Qwen-style chat template reduced to what OCR needs: text and image parts.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Enough Turkish to give the BPE every letter of the alphabet and common pieces.
SEED_CORPUS = """\
Fatura No: 2024/118 Tarih: 12.03.2024 Müşteri: Çağlar Öztürk Ltd. Şti.
Ürün Adı Miktar Birim Fiyat Tutar KDV %20 Genel Toplam 1.250,00 TL
Sayın İlgili, başvurunuz değerlendirilmiş ve uygun görülmüştür. Saygılarımızla.
Ağaçlı yolda yürüyen çocuklar, ışıklı vitrinlerin önünde durdu.
İstanbul, Ankara, İzmir, Bursa, Eskişehir, Muğla, Iğdır, Şanlıurfa, Çanakkale.
ABCÇDEFGĞHIİJKLMNOÖPRSŞTUÜVYZ abcçdefgğhıijklmnoöprsştuüvyz 0123456789
# Başlık ## Alt başlık | Tablo | Sütun | **kalın** *italik* - madde 1. madde
Q W X q w x @ & % ( ) [ ] { } < > = + - / \\ : ; , . ! ? ' " _ ~ ^ $ € ₺ #
"""


@dataclass(frozen=True)
class TinySizes:
    """Sizes of the tiny model; defaults keep it a few MB and vLLM-CPU compatible."""

    vocab_size: int = 512
    hidden_size: int = 128
    intermediate_size: int = 256
    num_hidden_layers: int = 4
    full_attention_interval: int = 2
    # Explicit per-layer types ("linear_attention" | "full_attention"); None: every `full_attention_interval`-th is full.
    layer_types: tuple[str, ...] | None = None
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    head_dim: int = 64
    linear_num_key_heads: int = 1
    linear_num_value_heads: int = 1
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    vision_depth: int = 2
    vision_hidden_size: int = 64
    vision_heads: int = 2
    vision_intermediate_size: int = 128
    min_pixels: int = 32 * 32 * 4
    max_pixels: int = 32 * 32 * 256


def train_tokenizer(vocab_size: int, corpus: list[str] | None = None) -> Tokenizer:
    """A byte-level BPE in Qwen's style; special tokens take the first ids."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = corpus if corpus is not None else SEED_CORPUS.splitlines() * 4
    tokenizer.train_from_iterator(lines, trainer=trainer)
    return tokenizer


def character_tokenizer(characters: str) -> Tokenizer:
    """A byte-level BPE whose only merges join the bytes of each of `characters`: one token per
    listed character (other text falls back to one token per byte), the same tokenizer class and
    decoding as the BPE above, so every engine handles it unchanged.
    """
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    merges: list[tuple[str, str]] = []
    for character in dict.fromkeys(characters):
        ((mapped, _),) = byte_level.pre_tokenize_str(character)
        joined = mapped[0]
        for symbol in mapped[1:]:  # multi-byte characters: merge left to right
            merges.append((joined, symbol))
            joined += symbol
            vocab.setdefault(joined, len(vocab))
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    return tokenizer


def build_config(sizes: TinySizes, tokenizer: Tokenizer, tie_word_embeddings: bool = True) -> Qwen3_5Config:
    token_id = tokenizer.token_to_id
    rotary_pairs = int(sizes.head_dim * 0.25) // 2
    mrope_section = [rotary_pairs - 2 * (rotary_pairs // 3), rotary_pairs // 3, rotary_pairs // 3]
    text_config = dict(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=sizes.hidden_size,
        intermediate_size=sizes.intermediate_size,
        num_hidden_layers=sizes.num_hidden_layers,
        num_attention_heads=sizes.num_attention_heads,
        num_key_value_heads=sizes.num_key_value_heads,
        head_dim=sizes.head_dim,
        linear_num_key_heads=sizes.linear_num_key_heads,
        linear_num_value_heads=sizes.linear_num_value_heads,
        linear_key_head_dim=sizes.linear_key_head_dim,
        linear_value_head_dim=sizes.linear_value_head_dim,
        linear_conv_kernel_dim=4,
        layer_types=list(sizes.layer_types)
        if sizes.layer_types is not None
        else [
            "full_attention" if (i + 1) % sizes.full_attention_interval == 0 else "linear_attention"
            for i in range(sizes.num_hidden_layers)
        ],
        max_position_embeddings=8192,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10_000_000,
            "partial_rotary_factor": 0.25,
            "mrope_section": mrope_section,
            "mrope_interleaved": True,
        },
        tie_word_embeddings=tie_word_embeddings,
        eos_token_id=token_id("<|im_end|>"),
        pad_token_id=token_id("<|endoftext|>"),
        mtp_num_hidden_layers=1,
        mtp_use_dedicated_embeddings=False,
        dtype="bfloat16",
    )
    vision_config = dict(
        depth=sizes.vision_depth,
        hidden_size=sizes.vision_hidden_size,
        num_heads=sizes.vision_heads,
        intermediate_size=sizes.vision_intermediate_size,
        patch_size=16,
        spatial_merge_size=2,
        temporal_patch_size=2,
        out_hidden_size=sizes.hidden_size,
        num_position_embeddings=2304,
    )
    return Qwen3_5Config(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=token_id("<|image_pad|>"),
        video_token_id=token_id("<|video_pad|>"),
        vision_start_token_id=token_id("<|vision_start|>"),
        vision_end_token_id=token_id("<|vision_end|>"),
        tie_word_embeddings=tie_word_embeddings,
        eos_token_id=token_id("<|im_end|>"),
        pad_token_id=token_id("<|endoftext|>"),
    )


def random_mtp_head(config: Qwen3_5Config) -> dict[str, torch.Tensor]:
    """A head in the Qwen3.5 checkpoint layout (`mtp.*`), randomly initialised."""
    text_config = config.text_config
    hidden = text_config.hidden_size
    full_attention_layer_idx = text_config.layer_types.index("full_attention")
    layer = Qwen3_5DecoderLayer(text_config, layer_idx=full_attention_layer_idx)
    std = text_config.initializer_range
    head: dict[str, torch.Tensor] = {}
    for name, tensor in layer.state_dict().items():
        # Qwen3.5 RMSNorms scale by (1 + weight): zeros are the identity.
        is_norm = name.endswith("norm.weight")
        head[f"mtp.layers.0.{name}"] = torch.zeros_like(tensor) if is_norm else torch.randn_like(tensor) * std
    head["mtp.fc.weight"] = torch.randn(hidden, 2 * hidden) * std
    for norm in ("mtp.norm.weight", "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight"):
        head[norm] = torch.zeros(hidden)
    return head


def write_processor(
    out_dir: Path,
    tokenizer: Tokenizer,
    min_pixels: int,
    max_pixels: int,
    special_tokens: list[str] = SPECIAL_TOKENS,
    model_max_length: int = 8192,
) -> None:
    hf_tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        model_max_length=model_max_length,
    )
    hf_tokenizer.add_special_tokens({"additional_special_tokens": [t for t in special_tokens if t != "<|endoftext|>"]})
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=16,
        merge_size=2,
        temporal_patch_size=2,
        size={"shortest_edge": min_pixels, "longest_edge": max_pixels},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    video_processor = Qwen3VLVideoProcessor(patch_size=16, merge_size=2, temporal_patch_size=2)
    processor = Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=hf_tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(out_dir)


def make_predictable(
    model: Qwen3_5ForConditionalGeneration,
    head: dict[str, torch.Tensor],
    seed: int,
    special_ids: list[int] | None = None,
) -> list[int]:
    """Turn the model into one whose next token is a fixed permutation of the current one,
    and the head into one that computes exactly that; returns the permutation.

    Every layer's output projection is zeroed, so the last hidden state is the
    normalised embedding of the current token alone; `lm_head` row pi(x) is then
    embedding x (scaled up for a wide logit margin, safe in bf16).  The head's fc
    keeps only the (normalised) embedding of the token it is given, and its layer
    passes that through, so its draft is pi(token) as well: 100% acceptance.
    Special tokens (`special_ids`, default the first len(SPECIAL_TOKENS) ids) map to
    themselves and never appear in the output.
    """
    text_model = model.model.language_model
    with torch.no_grad():
        for layer in text_model.layers:
            mixer = layer.self_attn.o_proj if hasattr(layer, "self_attn") else layer.linear_attn.out_proj
            mixer.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embeddings = text_model.embed_tokens.weight  # [V, H]
        vocab_size, hidden = embeddings.shape
        generator = torch.Generator().manual_seed(seed)
        special = torch.zeros(vocab_size, dtype=torch.bool)
        special[special_ids if special_ids is not None else list(range(len(SPECIAL_TOKENS)))] = True
        ordinary = torch.arange(vocab_size)[~special]
        permutation = torch.arange(vocab_size)
        permutation[ordinary] = ordinary[torch.randperm(len(ordinary), generator=generator)]
        lm_head = torch.empty_like(embeddings)
        lm_head[permutation] = embeddings * 10.0
        model.lm_head.weight.copy_(lm_head)
    fc = head["mtp.fc.weight"]
    head["mtp.fc.weight"] = torch.cat([torch.eye(hidden), torch.zeros(hidden, hidden)], dim=1).to(fc.dtype)
    head["mtp.layers.0.self_attn.o_proj.weight"].zero_()
    head["mtp.layers.0.mlp.down_proj.weight"].zero_()
    return permutation.tolist()


def build_tiny_model(
    out_dir: Path, seed: int = 0, sizes: TinySizes = TinySizes(), predictable: bool = False
) -> Path:
    """Write the checkpoint folder and return it; the same seed gives the same bytes.

    `predictable=True` writes the model of `make_predictable`, whose head drafts
    exactly what the model will say.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    tokenizer = train_tokenizer(sizes.vocab_size)
    config = build_config(sizes, tokenizer, tie_word_embeddings=not predictable)
    model = Qwen3_5ForConditionalGeneration(config).eval()
    head = random_mtp_head(config)
    if predictable:
        permutation = make_predictable(model, head, seed)
        (out_dir / "next_token_permutation.json").write_text(json.dumps(permutation))
    model.save_pretrained(out_dir, safe_serialization=True)
    save_file({k: v.contiguous() for k, v in head.items()}, out_dir / "mtp.safetensors")
    write_weight_index(out_dir)
    write_processor(out_dir, tokenizer, sizes.min_pixels, sizes.max_pixels)
    # The tiny-random preset as the folder's own (its `path` gives way to the folder's): any tiny folder
    # passed as --model reads as `--model tiny-random` does, a few tokens of small pages.
    (out_dir / FOLDER_PRESET_NAME).write_bytes((configs_dir() / "models" / "tiny-random.toml").read_bytes())
    return out_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--predictable", action="store_true", help="next token = fixed permutation of the current one; exact MTP head"
    )
    args = parser.parse_args()
    print(build_tiny_model(args.out_dir, seed=args.seed, predictable=args.predictable))


if __name__ == "__main__":
    main()
