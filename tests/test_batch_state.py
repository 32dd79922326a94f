"""The state store: durable, one writer at a time, damage reported in one line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ocr_app.batch.state import DONE, STATE_FILE, StateStore, content_hash
from ocr_app.errors import OcrError
from ocr_app.metrics import PageMetrics, SpecDecodingStats
from ocr_app.outputs import PageResult


def test_pages_survive_reopening_with_text_metrics_and_attempts(tmp_path):
    source = tmp_path / "belge.pdf"
    source.write_bytes(b"%PDF-1.7 some bytes")
    metrics = PageMetrics(prompt_tokens=40, output_tokens=12, wall_s=0.5, finish_reason="stop", drafts=2, spec=SpecDecodingStats())
    metrics.spec.observe_draft(2, 1)
    with StateStore.open(tmp_path / "out") as store:
        assert store.db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        store.start_document(source, Path("belge.md"), content_hash(source), "job")
        store.record_page(source, PageResult(1, "", error="engine error: boom"))
        assert store.record_page(source, PageResult(1, "Şirket: İstanbul\n| a | b |", metrics)) == 2
    with StateStore.open(tmp_path / "out") as store:
        page = store.pages(source)[1]
        assert (page.status, page.attempts, page.error) == (DONE, 2, None)
        assert page.text == "Şirket: İstanbul\n| a | b |"
        assert page.metrics == metrics
        store.start_document(source, Path("belge.md"), "another hash", "job")  # the input changed
        assert store.pages(source) == {}


def test_one_writer_per_output_folder(tmp_path):
    with StateStore.open(tmp_path):
        with pytest.raises(OcrError, match="another ocr-read"):
            with StateStore.open(tmp_path):
                pass


def test_a_damaged_store_is_reported_not_overwritten(tmp_path):
    (tmp_path / STATE_FILE).write_bytes(b"this is not a database" * 100)
    with pytest.raises(OcrError, match="damaged state store"):
        with StateStore.open(tmp_path):
            pass
    assert (tmp_path / STATE_FILE).read_bytes().startswith(b"this is not")


def test_content_hash_reads_in_chunks(tmp_path):
    path = tmp_path / "big.bin"
    path.write_bytes(bytes(range(256)) * 5000)
    assert content_hash(path, chunk_size=1000) == hashlib.sha256(path.read_bytes()).hexdigest()
