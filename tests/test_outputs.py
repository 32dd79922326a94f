"""Outputs: one section per page, and writes that are never seen half-done."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ocr_app.metrics import PageMetrics, SpecDecodingStats
from ocr_app.outputs import DocumentResult, PageResult, render_json, render_markdown, write_atomic


def result() -> DocumentResult:
    spec = SpecDecodingStats()
    spec.observe_draft(3, 2)
    metrics = PageMetrics(prompt_tokens=10, output_tokens=6, wall_s=0.5, finish_reason="stop", drafts=3, spec=spec)
    return DocumentResult(Path("fatura.pdf"), (PageResult(1, "Birinci sayfa\n", metrics), PageResult(3, "Üçüncü")))


def test_markdown_has_one_section_per_page():
    markdown = render_markdown(result())
    assert markdown == "<!-- page 1 -->\n\nBirinci sayfa\n\n<!-- page 3 -->\n\nÜçüncü\n"
    assert render_markdown(result(), "## Sayfa {page}").startswith("## Sayfa 1\n\nBirinci")


def test_json_carries_text_and_metrics():
    data = json.loads(render_json(result(), {"engine": "hf"}))
    assert data["engine"] == "hf"
    assert [page["page"] for page in data["pages"]] == [1, 3]
    spec = data["pages"][0]["metrics"]["spec"]
    assert spec["accepted_per_position"] == [1, 1, 0]
    assert spec["mean_acceptance_length"] == 3.0
    assert data["pages"][0]["metrics"]["tokens_per_s"] == 12.0


def test_write_atomic_replaces_whole_file(tmp_path):
    target = tmp_path / "alt" / "çıktı.md"
    write_atomic(target, "ilk")
    write_atomic(target, "ikinci")
    assert target.read_text() == "ikinci"
    assert [p.name for p in target.parent.iterdir()] == ["çıktı.md"]
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask  # like a plain open(), not mkstemp's 0600


def test_interrupted_write_leaves_old_file_and_no_debris(tmp_path, monkeypatch):
    target = tmp_path / "out.md"
    write_atomic(target, "tamamlanmış")

    def crash(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, "yarım kalan " * 1000)
    assert target.read_text() == "tamamlanmış"
    assert [p.name for p in tmp_path.iterdir()] == ["out.md"]
