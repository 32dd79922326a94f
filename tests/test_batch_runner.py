"""The batch runner in process, on the real tiny model: resume rules, retries, failures that do not stop the run."""

from __future__ import annotations

import os
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from ocr_app.batch.runner import BatchEvents, BatchOptions, run_batch
from ocr_app.batch.state import FAILED, PARTIAL, StateStore
from ocr_app.config import load_mode_preset
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.pipeline import ReadJob


@pytest.fixture
def job(tiny_preset) -> ReadJob:
    return ReadJob(model=tiny_preset, mode=load_mode_preset("bulk"), settings=GenerationSettings(max_tokens=8), dpi=36)


@pytest.fixture
def folder(tmp_path) -> Path:
    inputs = tmp_path / "girdi"
    inputs.mkdir()
    Image.new("RGB", (96, 64), "white").save(inputs / "a.png")
    with pymupdf.open() as pdf:
        for _ in range(2):
            pdf.new_page(width=144, height=144)
        pdf.save(inputs / "b.pdf")
    return inputs


def batch(folder: Path, engine, job: ReadJob, **options) -> tuple:
    """Run over every file of `folder`; returns the summary and the (name, page, ok) of each page read."""
    output = folder.parent / "out"
    targets = {path: output / path.with_suffix(".md").name for path in sorted(folder.iterdir())}
    read: list[tuple[str, int, bool]] = []
    events = BatchEvents(on_page=lambda source, page, attempts: read.append((source.name, page.number, page.ok)))
    with StateStore.open(output) as store:
        summary = run_batch(targets, engine, job, store, BatchOptions(output_dir=output, **options), events)
        rows = {row.source.name: row for row in store.documents()}
    return summary, read, rows


def test_rerun_goes_by_content_not_by_timestamp(folder, hf_engine, job):
    first, read, _ = batch(folder, hf_engine, job)
    assert first.ok and len(read) == 3
    os.utime(folder / "a.png", (1, 1))  # only the timestamp changes
    Image.new("RGB", (96, 64), "black").save(folder / "b.png")  # a new document
    second, read, _ = batch(folder, hf_engine, job)
    assert [path.name for path in second.skipped] == ["a.png", "b.pdf"]
    assert read == [("b.png", 1, True)]
    Image.new("RGB", (96, 64), "gray").save(folder / "a.png")  # new bytes under the same name
    third, read, _ = batch(folder, hf_engine, job)
    assert read == [("a.png", 1, True)]
    forced, read, _ = batch(folder, hf_engine, job, force=True)
    assert len(read) == 4 and len(forced.written) == 3


def test_an_engine_failure_is_retried_and_then_succeeds(folder, hf_engine, job, monkeypatch):
    language_model = hf_engine.model.model.language_model
    forward = language_model.forward
    calls = []

    # A transient device error in the first forward of the language model, which every read runs through,
    # one page at a time (`generate`) or many to a forward (`read_many`'s batched decoder).
    def fails_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return forward(*args, **kwargs)

    monkeypatch.setattr(language_model, "forward", fails_once)
    summary, read, _ = batch(folder, hf_engine, job)
    assert summary.ok
    assert read[0] == ("a.png", 1, False) and read[-1] == ("a.png", 1, True)
    assert (folder.parent / "out" / "a.md").exists()


def test_a_page_that_keeps_failing_fails_its_document_or_gets_a_placeholder(folder, hf_engine, job, monkeypatch):
    def always_fails(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(hf_engine.model.model.language_model, "forward", always_fails)
    summary, read, rows = batch(folder, hf_engine, job, max_attempts=2)
    assert sorted(read) == sorted([("a.png", 1, False)] * 2 + [("b.pdf", 1, False)] * 2 + [("b.pdf", 2, False)] * 2)
    assert {row.status for row in rows.values()} == {FAILED}
    assert "engine error: RuntimeError: out of memory" in rows["b.pdf"].error
    assert not (folder.parent / "out" / "b.md").exists()

    summary, read, rows = batch(folder, hf_engine, job, max_attempts=1, allow_partial=True, retry_failed=True)
    assert rows["b.pdf"].status == PARTIAL and len(summary.failed) == 2
    text = (folder.parent / "out" / "b.md").read_text()
    assert "[page 2 could not be read: engine error: RuntimeError: out of memory]" in text


def test_a_file_that_vanishes_mid_run_fails_alone(folder, hf_engine, job):
    def vanish(pages: int) -> None:  # after the documents were opened, before their pages are rendered
        (folder / "b.pdf").unlink(missing_ok=True)

    output = folder.parent / "out"
    targets = {path: output / path.with_suffix(".md").name for path in sorted(folder.iterdir())}
    with StateStore.open(output) as store:
        summary = run_batch(targets, hf_engine, job, store, BatchOptions(output_dir=output), BatchEvents(on_planned=vanish))
    assert [path.name for path in summary.written] == ["a.png"]
    [(source, reason)] = summary.failed
    assert source.name == "b.pdf" and "no such file" in reason.lower()

