"""The hf engine with MTP drafting: same text as plain decoding, streamed, with spec metrics; and the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ocr_app.checkpoint import write_weight_index
from ocr_app.documents import open_document
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.pages import iter_pages

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_PDF = PROJECT_ROOT / "samples" / "fatura.pdf"


@pytest.fixture(scope="module")
def first_page(tiny_preset):
    return next(iter_pages(open_document(SAMPLE_PDF), [1], tiny_preset.pixels)).image


def test_drafting_reads_the_same_tokens_as_plain_decoding(hf_engine, first_page):
    plain = hf_engine.read(first_page, GenerationSettings(max_tokens=20, logit_gaps=True))
    drafted = hf_engine.read(first_page, GenerationSettings(max_tokens=20, drafts=3, logit_gaps=True))
    assert drafted.token_ids == plain.token_ids and drafted.text == plain.text
    # The main model's top-2 gap before each output token, the same from generate's logits and verify's.
    assert len(plain.top2_gaps) == plain.metrics.output_tokens and min(plain.top2_gaps) >= 0
    assert drafted.top2_gaps == pytest.approx(plain.top2_gaps, abs=1e-4)
    assert hf_engine.read(first_page, GenerationSettings(max_tokens=20)).top2_gaps is None
    assert drafted.metrics.drafts == 3 and plain.metrics.spec is None
    stats = drafted.metrics.spec
    assert stats.num_drafts > 0 and len(stats.accepted_per_position) == 3
    assert drafted.metrics.output_tokens == plain.metrics.output_tokens


def test_drafting_streams_the_text(predictable_model_dir, first_page):
    from ocr_app.config import load_model_preset
    from ocr_app.engines.hf import HFEngine

    engine = HFEngine(load_model_preset(predictable_model_dir))
    pieces: list[str] = []
    page = engine.read(first_page, GenerationSettings(max_tokens=24, drafts=4), on_text=pieces.append)
    assert len(pieces) > 1 and "".join(pieces) == page.text
    assert page.metrics.spec.num_accepted_tokens == page.metrics.spec.num_draft_tokens


def run_cli(*args: str) -> subprocess.CompletedProcess:
    # PYTHONPATH makes this checkout's ocr_app win over any installed copy.
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    command = [sys.executable, "-m", "ocr_app.cli.read", *args]
    return subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_cli_reads_a_pdf_with_drafts(tiny_model_dir, tmp_path):
    out = tmp_path / "fatura.json"
    result = run_cli(
        str(SAMPLE_PDF), "--model", str(tiny_model_dir), "--engine", "hf", "--drafts", "3",
        "--max-tokens", "8", "--format", "json", "-o", str(out),
    )
    assert result.returncode == 0, result.stderr
    pages = json.loads(out.read_text())["pages"]
    assert len(pages) == 2
    assert all(page["metrics"]["drafts"] == 3 and page["metrics"]["spec"]["num_drafts"] > 0 for page in pages)


def test_cli_says_in_one_line_when_the_model_has_no_head(tiny_model_dir, tmp_path):
    folder = tmp_path / "headless"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "mtp.safetensors").unlink()
    write_weight_index(folder)
    result = run_cli(
        str(SAMPLE_PDF), "--model", str(folder), "--engine", "hf", "--drafts", "3", "--pages", "1",
        "--max-tokens", "4", "-o", str(tmp_path / "x.md"),
    )
    assert result.returncode == 1
    message = [line for line in result.stderr.splitlines() if "MTP head" in line]
    assert message and "no MTP head" in message[0] and "Traceback" not in result.stderr
