"""A training checkpoint as a model folder in the Hugging Face layout, ready for both engines.

The folder gets the bf16 weights (`save_pretrained`), the processor with the
chat template, a fresh random MTP head in `mtp.safetensors` listed by the
weight index (for `ocr-train-mtp` to train later), the prompt and pixel budget
it was trained with (`ocr_app.toml`, so `--model FOLDER` reads as training
did; its page reading, `[regions]`, the run's own or another recipe's), the run's counters (`training_state.json`, for `ocr-train-ocr train
--warm-start`) and a README.md recording how the weights were made.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from ocr_app.checkpoint import write_weight_index
from ocr_app.config import FOLDER_PRESET_NAME, RegionSplit
from ocr_app.errors import ConfigError
from ocr_app.testing.tiny_model import random_mtp_head, write_processor
from ocr_app.train_ocr.config import load_train_config
from ocr_app.train_ocr.trainer import TRAINING_STATE_NAME, checkpoint_config, exported_weights, load_checkpoint, new_model


def export_checkpoint(checkpoint_path: Path, out_dir: Path, regions_from: Path | None = None) -> Path:
    """Write the model folder for `checkpoint_path` to `out_dir`, replacing what was there.

    `regions_from`: a recipe whose `[regions]` the folder reads pages with instead of the run's own, for a page
    reading measured better on real documents than the one the weights were trained with.
    """
    checkpoint = load_checkpoint(checkpoint_path)
    config = checkpoint_config(checkpoint, str(checkpoint_path))
    if regions_from is not None:
        config = config.model_copy(update={"regions": recipe_regions(regions_from)})
    tokenizer, model = new_model(config)
    model.load_state_dict(exported_weights(checkpoint))
    model.to(torch.bfloat16)
    staging = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    model.save_pretrained(staging, safe_serialization=True)
    torch.manual_seed(config.seed)
    head = random_mtp_head(model.config)
    save_file({name: tensor.to(torch.bfloat16).contiguous() for name, tensor in head.items()}, staging / "mtp.safetensors")
    write_weight_index(staging)
    write_processor(staging, tokenizer, config.model.min_pixels, config.model.max_pixels)
    (staging / TRAINING_STATE_NAME).write_text(json.dumps(checkpoint["state"], indent=1))
    (staging / FOLDER_PRESET_NAME).write_text(folder_preset(config), encoding="utf-8")
    card = model_card(checkpoint, config, sum(p.numel() for p in model.parameters()), regions_from)
    (staging / "README.md").write_text(card)
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)
    return out_dir


def recipe_regions(path: Path) -> RegionSplit:
    regions = load_train_config(path).regions
    if regions is None:
        raise ConfigError(f"{path}: no [regions] to read pages with")
    return regions


def folder_preset(config) -> str:
    """The prompt and pixel budget the model was trained with, so `--model FOLDER` reads as training did,
    and the bands a page is cut into when the recipe says so."""
    regions = config.regions
    bands = "" if regions is None else "\n[regions]\n" + "".join(
        f"{key} = {json.dumps(value)}\n" for key, value in regions.model_dump(exclude_none=True).items()
    )
    return f"""# How to read with this model (ocr_app preset keys); written by `ocr-train-ocr export`.
prompt = {json.dumps(config.prompt, ensure_ascii=False)}
use_chat_template = true
max_tokens = {config.evaluation.max_new_tokens}
hf_dtype = "float32"

[pixels]
min_pixels = {config.model.min_pixels}
max_pixels = {config.model.max_pixels}
{bands}"""


def model_card(checkpoint: dict, config, parameters: int, regions_from: Path | None = None) -> str:
    state = checkpoint["state"]
    sessions = "\n".join(
        f"- commit `{s['commit']}`, steps {s['start_step']}+, {s['wall_s'] / 60:.1f} min: `{s['command']}`"
        for s in state["sessions"]
    )
    decay = config.optimizer.ema_decay
    weights = f"moving average of the trained weights (decay {decay})" if checkpoint.get("ema") else "the last step's"
    evaluation = ", ".join(f"{k} {v:.3f}" for k, v in state["last_eval"].items()) or "not measured yet"
    reading = "the training recipe's" if regions_from is None else f"`{regions_from}`'s, not the training recipe's"
    return f"""# ocr-tiny-tr

A small Qwen3.5 vision-language OCR model ({parameters / 1e6:.2f}M parameters, character-level
byte-level BPE of {len(config.characters)} merged characters) trained from scratch by `ocr-train-ocr` on synthetic
Turkish documents from `ocr_app.synth` (never the benchmark's reserved seeds). The MTP head in
`mtp.safetensors` is random until `ocr-train-mtp` trains it and records its run in a section below.
Recipe, measured figures (real documents first) and training history: `docs/ocr-tiny-tr.md` in the
ocr_app repository.

- Steps: {state['step']} ({state['data_position']} samples), training wall time {state['wall_s'] / 3600:.2f} h
- Held-out greedy CER at the last evaluation: {evaluation}
- Weights: {weights}
- Prompt: `{config.prompt}`; pixels {config.model.min_pixels}..{config.model.max_pixels}
- Page reading (`[regions]` in ocr_app.toml): {reading}

Training sessions (each resumed from the last one's checkpoint, or warm-started from its export):
{sessions}
"""
