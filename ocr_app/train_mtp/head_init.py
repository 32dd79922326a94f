"""Start points for the head: the checkpoint's own head, another model's head file, or fresh weights."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5RMSNorm

from ocr_app.checkpoint import HEAD_FILE, HEAD_PREFIX, expected_head_shapes
from ocr_app.errors import ModelError
from ocr_app.speculative.mtp_head import MTPHead, load_mtp_head


def fresh_head(main_model, seed: int) -> MTPHead:
    """fc and the decoder layer drawn as the main model was initialised (normal, std initializer_range);
    every RMSNorm at identity (Qwen3.5 norms scale by 1 + weight, so zeros)."""
    head = MTPHead(main_model)
    std = main_model.config.text_config.initializer_range
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, module in head.named_modules():
            own = list(module.parameters(recurse=False))
            if isinstance(module, Qwen3_5RMSNorm):
                module.weight.zero_()
            elif isinstance(module, nn.Linear):
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * std)
                if module.bias is not None:
                    module.bias.zero_()
            elif own:
                raise ModelError(f"fresh head: no initialisation rule for {name} ({type(module).__name__})")
    return head


def head_from_file(path: Path, main_model) -> MTPHead:
    """A head from a safetensors file (or a model folder's mtp.safetensors) with `mtp.*` tensors."""
    file = path / HEAD_FILE if path.is_dir() else path
    if not file.exists():
        raise ModelError(f"no head file at {file}")
    expected = expected_head_shapes(main_model.config.text_config)
    with safe_open(str(file), framework="pt") as handle:
        state = {name: handle.get_tensor(name) for name in handle.keys() if name.startswith(HEAD_PREFIX)}
    missing = sorted(set(expected) - set(state))
    if missing:
        raise ModelError(f"{file} lacks {len(missing)} MTP head tensors (e.g. {missing[0]})")
    for name, shape in expected.items():
        if tuple(state[name].shape) != shape:
            raise ModelError(f"{file}: {name} has shape {list(state[name].shape)}, this model needs {list(shape)}")
    head = MTPHead(main_model)
    head.load_state_dict({name[len(HEAD_PREFIX) :]: tensor for name, tensor in state.items() if name in expected})
    return head


def initial_head(init: str, model_dir: Path, main_model, seed: int) -> MTPHead:
    """`existing` (the checkpoint's head), `fresh`, or a path to another head; in float32 for training."""
    if init == "existing":
        head = load_mtp_head(model_dir, main_model)
    elif init == "fresh":
        head = fresh_head(main_model, seed)
    else:
        head = head_from_file(Path(init), main_model)
    return head.to(device=main_model.lm_head.weight.device, dtype=torch.float32).train()


def head_state(head: nn.Module) -> dict[str, torch.Tensor]:
    """The head's tensors under their checkpoint names (`mtp.*`)."""
    return {f"{HEAD_PREFIX}{name}": tensor for name, tensor in head.state_dict().items()}
