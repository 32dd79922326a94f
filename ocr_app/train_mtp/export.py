"""The trained model folder: every file of the input copied unchanged, the head as `mtp.safetensors`,
and an index whose weight_map lists the head, so vLLM and the transformers engine both load it."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from ocr_app.checkpoint import HEAD_FILE, INDEX_NAME, inspect_mtp_head, write_weight_index
from ocr_app.errors import ConfigError, ModelError
from ocr_app.speculative.mtp_head import MTPHead
from ocr_app.train_mtp.head_init import head_state


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 24), b""):
            digest.update(chunk)
    return digest.hexdigest()


def main_weight_hashes(model_dir: Path) -> dict[str, str]:
    """sha256 of every safetensors file but the head's: these must never change."""
    return {path.name: file_sha256(path) for path in sorted(model_dir.glob("*.safetensors")) if path.name != HEAD_FILE}


def prepare_output(model_dir: Path, output_dir: Path, overwrite_input: bool = False) -> None:
    """Copy the model folder (all but the head and index, which training writes)."""
    if output_dir.resolve() == model_dir.resolve():
        if not overwrite_input:
            raise ConfigError(f"--output is the input model folder {model_dir}; pass --in-place to write the head there")
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    for source in sorted(model_dir.iterdir()):
        if source.name in (HEAD_FILE, INDEX_NAME):
            continue
        target = output_dir / source.name
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)


def export_head(head: MTPHead, output_dir: Path, dtype: torch.dtype, text_config) -> None:
    """Write mtp.safetensors (atomically) and the index, then check the folder as the engines will."""
    state = {name: tensor.detach().to("cpu", dtype).contiguous() for name, tensor in head_state(head).items()}
    partial = output_dir / f".{HEAD_FILE}.partial"
    save_file(state, partial, metadata={"format": "pt"})
    partial.replace(output_dir / HEAD_FILE)
    write_weight_index(output_dir)
    report = inspect_mtp_head(output_dir, text_config)
    if not report.usable:
        raise ModelError(f"the exported head would not load: {report.message}")


HEAD_SECTION = "## MTP head"


def record_head_training(output_dir: Path, record: list[str]) -> None:
    """Write this run's record as the model card's MTP head section (README.md), replacing an earlier one."""
    card_path = output_dir / "README.md"
    card = card_path.read_text(encoding="utf-8") if card_path.exists() else ""
    card = card.split(f"\n{HEAD_SECTION}\n")[0].rstrip("\n")
    section = "\n".join([HEAD_SECTION, "", *record])
    card_path.write_text(f"{card}\n\n{section}\n" if card else f"{section}\n", encoding="utf-8")
