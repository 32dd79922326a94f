"""Shared fixtures: tiny models built once per session, offline, from a fixed seed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# The venv's torchvision .pth hook imports `ocr_app` from the installed (editable, /work/main) copy before
# pytest puts this checkout on sys.path; forget that copy so a worktree's tests run its own code.
installed = sys.modules.get("ocr_app")
if installed is not None and not Path(installed.__file__).resolve().is_relative_to(PROJECT_ROOT):
    for name in [name for name in sys.modules if name == "ocr_app" or name.startswith("ocr_app.")]:
        del sys.modules[name]

from ocr_app.testing.tiny_model import build_tiny_model  # noqa: E402
SAMPLE_PDF = PROJECT_ROOT / "samples" / "fatura.pdf"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """Random weights, MTP head in mtp.safetensors listed by the index."""
    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny", seed=0)


@pytest.fixture(scope="session")
def predictable_model_dir(tmp_path_factory) -> Path:
    """Next token = fixed permutation of the current one; its MTP head drafts exactly that."""
    return build_tiny_model(tmp_path_factory.mktemp("models") / "predictable", seed=1, predictable=True)


@pytest.fixture(scope="session")
def tiny_preset(tiny_model_dir):
    from ocr_app.config import load_model_preset

    return load_model_preset(tiny_model_dir)


@pytest.fixture(scope="session")
def hf_engine(tiny_preset):
    from ocr_app.engines.hf import HFEngine

    return HFEngine(tiny_preset)
