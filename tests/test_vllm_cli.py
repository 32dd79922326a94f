"""`ocr-read --engine vllm` end to end: both modes, JSON with acceptance counters, and a head vLLM would skip."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT, SAMPLE_PDF
from tests.vllm_support import VLLM_TEST_ENV

pytestmark = pytest.mark.slow
DRAFTS = 3


def ocr_read(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.read", *map(str, args)],
        cwd=PROJECT_ROOT,
        env={**os.environ, **VLLM_TEST_ENV},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_pages_with_counters(document: dict, numbers: list[int]) -> None:
    assert [page["page"] for page in document["pages"]] == numbers
    for page in document["pages"]:
        assert page["error"] is None and page["text"]
        spec = page["metrics"]["spec"]
        assert page["metrics"]["drafts"] == DRAFTS and spec["num_drafts"] > 0
        assert len(spec["accepted_per_position"]) == DRAFTS
        assert len(spec["acceptance_rate_per_position"]) == DRAFTS


def test_low_latency_mode(tiny_model_dir, tmp_path):
    out = tmp_path / "out.json"
    result = ocr_read(
        SAMPLE_PDF, "--engine", "vllm", "--model", tiny_model_dir, "--mode", "low-latency",
        "--drafts", DRAFTS, "--max-tokens", 16, "--format", "json", "-o", out,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())
    assert document["engine"] == "vllm" and document["mode"] == "low-latency"
    assert_pages_with_counters(document, [1, 2])
    assert "MTP: mean acceptance length" in result.stderr


def test_bulk_mode_reassembles_documents(tiny_model_dir, tmp_path, sample_png):
    inputs = tmp_path / "in"
    inputs.mkdir()
    shutil.copy(SAMPLE_PDF, inputs / "a.pdf")
    shutil.copy(SAMPLE_PDF, inputs / "b.pdf")
    sample_png.save(inputs / "c.png")
    # The files, not their folder: a folder takes the batch path (tests/test_batch_cli.py).
    result = ocr_read(
        *sorted(inputs.iterdir()), "--engine", "vllm", "--model", tiny_model_dir, "--mode", "bulk",
        "--drafts", DRAFTS, "--max-tokens", 16, "--format", "json", "-o", tmp_path / "out",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for name, numbers in (("a", [1, 2]), ("b", [1, 2]), ("c", [1])):
        assert_pages_with_counters(json.loads((tmp_path / "out" / f"{name}.json").read_text()), numbers)
    assert "5 pages" in result.stderr


def test_head_missing_from_index_is_refused(tiny_model_dir, tmp_path):
    model = shutil.copytree(tiny_model_dir, tmp_path / "model")
    index_path = model / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["weight_map"] = {k: v for k, v in index["weight_map"].items() if not k.startswith("mtp.")}
    index_path.write_text(json.dumps(index))
    result = ocr_read(SAMPLE_PDF, "--engine", "vllm", "--model", model, "--drafts", DRAFTS, timeout=120)
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
    assert "does not list" in result.stderr and "vLLM would skip the head" in result.stderr


@pytest.fixture
def sample_png(tiny_model_dir):
    from ocr_app.config import load_model_preset
    from tests.vllm_support import sample_page_images

    return sample_page_images(load_model_preset(tiny_model_dir), count=1)[0]
