"""Model folders on disk: the safetensors index and the MTP head's presence and shape.

vLLM reads a checkpoint through `model.safetensors.index.json` when it exists and
silently skips any safetensors file the index does not list; a head that did not
load drafts at ~0% acceptance.  These checks run before an engine starts so the
user hears about it in one line instead of seeing a slow run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import torch
from safetensors import safe_open

INDEX_NAME = "model.safetensors.index.json"
HEAD_FILE = "mtp.safetensors"
HEAD_PREFIX = "mtp."


def _tensor_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    with safe_open(str(path), framework="pt") as handle:
        return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}


def write_weight_index(model_dir: Path) -> Path:
    """Write an index whose weight_map lists every tensor of every safetensors file in the folder."""
    weight_map: dict[str, str] = {}
    total_bytes = 0
    for shard in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(shard), framework="pt") as handle:
            for name in handle.keys():
                weight_map[name] = shard.name
        total_bytes += shard.stat().st_size
    index = {"metadata": {"total_size": total_bytes}, "weight_map": dict(sorted(weight_map.items()))}
    index_path = model_dir / INDEX_NAME
    index_path.write_text(json.dumps(index, indent=2) + "\n")
    return index_path


def expected_head_shapes(text_config) -> dict[str, tuple[int, ...]]:
    """Names and shapes of the `mtp.*` tensors that vLLM's Qwen3.5 MTP loader takes."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer

    hidden = text_config.hidden_size
    layer_idx = text_config.layer_types.index("full_attention")
    with torch.device("meta"):
        layer = Qwen3_5DecoderLayer(text_config, layer_idx=layer_idx)
    shapes = {f"mtp.layers.0.{name}": tuple(t.shape) for name, t in layer.state_dict().items()}
    shapes["mtp.fc.weight"] = (hidden, 2 * hidden)
    for norm in ("norm", "pre_fc_norm_embedding", "pre_fc_norm_hidden"):
        shapes[f"mtp.{norm}.weight"] = (hidden,)
    return shapes


class HeadStatus(str, Enum):
    OK = "ok"
    MISSING = "missing"
    NOT_INDEXED = "not-indexed"
    INCOMPLETE = "incomplete"
    WRONG_SHAPE = "wrong-shape"


@dataclass(frozen=True)
class HeadReport:
    status: HeadStatus
    message: str

    @property
    def usable(self) -> bool:
        return self.status is HeadStatus.OK


def inspect_mtp_head(model_dir: Path, text_config) -> HeadReport:
    """Say whether the folder's MTP head will load into vLLM and the transformers engine."""
    head_tensors: dict[str, tuple[int, ...]] = {}
    files_with_head: set[str] = set()
    for shard in sorted(model_dir.glob("*.safetensors")):
        for name, shape in _tensor_shapes(shard).items():
            if name.startswith(HEAD_PREFIX):
                head_tensors[name] = shape
                files_with_head.add(shard.name)
    if not head_tensors:
        return HeadReport(HeadStatus.MISSING, f"{model_dir} has no MTP head (no mtp.* tensors, no {HEAD_FILE})")

    index_path = model_dir / INDEX_NAME
    if index_path.exists():
        indexed = json.loads(index_path.read_text()).get("weight_map", {})
        unlisted = sorted(name for name in head_tensors if indexed.get(name) not in files_with_head)
        if unlisted:
            return HeadReport(
                HeadStatus.NOT_INDEXED,
                f"{INDEX_NAME} in {model_dir} does not list {len(unlisted)} MTP head tensors "
                f"(e.g. {unlisted[0]}); vLLM would skip the head",
            )
    elif len(list(model_dir.glob("*.safetensors"))) > 1:
        return HeadReport(
            HeadStatus.NOT_INDEXED,
            f"{model_dir} has several safetensors files but no {INDEX_NAME}; vLLM would read only model.safetensors",
        )

    expected = expected_head_shapes(text_config)
    missing = sorted(set(expected) - set(head_tensors))
    if missing:
        return HeadReport(HeadStatus.INCOMPLETE, f"MTP head in {model_dir} lacks {len(missing)} tensors (e.g. {missing[0]})")
    wrong = sorted(name for name, shape in expected.items() if head_tensors[name] != shape)
    if wrong:
        name = wrong[0]
        return HeadReport(
            HeadStatus.WRONG_SHAPE,
            f"MTP head tensor {name} in {model_dir} has shape {list(head_tensors[name])}, expected {list(expected[name])}",
        )
    return HeadReport(HeadStatus.OK, f"MTP head found ({len(head_tensors)} tensors)")
