"""Shared fixtures: tiny models built once per session, offline, from a fixed seed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ocr_app.testing.tiny_model import build_tiny_model

# The tiny models are overhead-bound: one thread is as fast as two on an idle machine and many
# times faster when subprocesses (CLI runs, servers, browsers) compete for the two cores.
torch.set_num_threads(1)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
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
