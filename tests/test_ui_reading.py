"""`ui.reading`: uploads checked, documents planned, and one request read with the real tiny model."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PIL import Image

from .conftest import SAMPLE_PDF
from ocr_app.config import RegionSplit, load_mode_preset
from ocr_app.documents import open_document
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.errors import InputError
from ocr_app.metrics import PageMetrics, RunMetrics, SpecDecodingStats
from ocr_app.outputs import render_markdown
from ocr_app.pages import iter_pages
from ocr_app.pipeline import ReadJob, read_documents
from ocr_app.regions import ReadByRegions, page_regions
from ui.reading import (
    DocumentEntry,
    PageEntry,
    Reading,
    Upload,
    accept_uploads,
    count_readings,
    errors_html,
    figures_markdown,
    plan_documents,
    progress_markdown,
    run_reading,
)


@pytest.fixture
def upload_root(tmp_path) -> Path:
    root = tmp_path / "uploads"
    (root / "a1").mkdir(parents=True)
    return root


def job_for(preset, pages: str | None = None) -> ReadJob:
    settings = GenerationSettings(max_tokens=preset.max_tokens, drafts=0)
    return ReadJob(model=preset, mode=load_mode_preset("low-latency"), settings=settings, pages=pages)


def test_only_files_under_the_upload_folder_are_accepted(upload_root, tmp_path):
    inside = upload_root / "a1" / "fatura.pdf"
    inside.write_bytes(SAMPLE_PDF.read_bytes())
    escape = upload_root / "a1" / "escape.pdf"
    escape.symlink_to(SAMPLE_PDF)

    assert accept_uploads([str(inside)], upload_root) == [Upload(inside.resolve())]
    for outside in (str(SAMPLE_PDF), str(upload_root / ".." / "x.pdf"), str(escape)):
        with pytest.raises(InputError, match="not an uploaded file"):
            accept_uploads([outside], upload_root)


def test_bad_uploads_get_the_library_message_under_their_own_name(upload_root, tiny_preset):
    folder = upload_root / "a1"
    (folder / "empty.png").write_bytes(b"")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\nnot a pdf at all")
    (folder / "notes.txt").write_text("hello")
    (folder / "fatura.pdf").write_bytes(SAMPLE_PDF.read_bytes())
    uploads = [Upload(folder / name) for name in ("empty.png", "broken.pdf", "notes.txt", "fatura.pdf")]

    planned, errors = plan_documents(uploads, job_for(tiny_preset), max_pages=10)

    expected = []
    for upload in uploads[:3]:
        with pytest.raises(InputError) as caught:
            open_document(upload.path)
        expected.append(str(caught.value).replace(str(upload.path), upload.name))
    assert errors == expected
    assert all(str(upload_root) not in error for error in errors)
    assert [(item.upload.name, item.numbers) for item in planned] == [("fatura.pdf", [1, 2])]


def test_page_range_applies_to_pdfs_and_the_page_limit_to_the_request(upload_root, tiny_preset):
    image_path = upload_root / "a1" / "photo.png"
    Image.new("RGB", (300, 400), "white").save(image_path)
    pdf = Upload(SAMPLE_PDF)  # planning only opens files; acceptance is checked before
    planned, errors = plan_documents([pdf, Upload(image_path)], job_for(tiny_preset, pages="2"), max_pages=2)
    assert errors == []
    assert [(item.upload.name, item.numbers, item.job.pages) for item in planned] == [
        ("fatura.pdf", [2], "2"),
        ("photo.png", [1], None),
    ]
    with pytest.raises(InputError, match="3 pages to read, over this server's limit of 2 per request"):
        plan_documents([pdf, Upload(image_path)], job_for(tiny_preset), max_pages=2)


def test_a_request_writes_what_ocr_read_writes(hf_engine, tiny_preset, tmp_path):
    """Two uploads of the same name are told apart; each gets the files `ocr-read` would write."""
    job = job_for(tiny_preset, pages="1")
    planned, _ = plan_documents([Upload(SAMPLE_PDF), Upload(SAMPLE_PDF)], job, max_pages=10)
    reading = Reading(model=tiny_preset.name, engine="hf", mode="low-latency", drafts=0)
    lock = threading.Lock()

    states = [progress_markdown(state) for state in run_reading(planned, hf_engine, lock, reading, tmp_path)]

    [result] = read_documents([SAMPLE_PDF], hf_engine, job)
    assert [Path(path).name for path in reading.downloads] == ["fatura.md", "fatura.json", "fatura-2.md", "fatura-2.json"]
    for markdown in (reading.downloads[0], reading.downloads[2]):
        assert Path(markdown).read_text(encoding="utf-8") == render_markdown(result)
    assert list(reading.pages) == ["fatura.pdf · page 1", "fatura-2.pdf · page 1"]
    assert reading.pages["fatura-2.pdf · page 1"].text == result.pages[0].text
    assert states[0].startswith("Reading fatura.pdf · page 1: 0 of 2 pages done")  # shown before any token
    assert states[-1].startswith("Done: 2 pages from 2 documents")
    assert reading.live.output_tokens == 2 * result.pages[0].metrics.output_tokens
    assert f"{reading.live.output_tokens} tokens" in states[-1]
    assert lock.acquire(blocking=False)


def test_live_figures_count_each_band_as_it_comes_back(hf_engine, tiny_preset):
    """Beneath the split into bands, so that they move while a page is read; they add up to the page's."""
    [page] = iter_pages(open_document(SAMPLE_PDF), [1], tiny_preset.pixels, 60)
    split = RegionSplit(max_height=48, margin=8)
    engine = ReadByRegions(hf_engine, split, tiny_preset.pixels)
    parts = sum(part is not None for band in page_regions(page.image, split, tiny_preset.pixels) for part in band.images)
    settings = GenerationSettings(max_tokens=4, drafts=2)
    seen: list[PageMetrics] = []
    counted = count_readings(engine, seen.append)

    alone = counted.read(page.image, settings)
    [(_, in_bulk)] = counted.read_many([("p", page.image)], settings, concurrency=4)

    assert parts > 1 and len(seen) == 2 * parts
    for read, observed in ((alone, seen[:parts]), (in_bulk, seen[parts:])):
        assert sum(metrics.output_tokens for metrics in observed) == read.metrics.output_tokens
        assert sum(metrics.spec.num_drafts for metrics in observed) == read.metrics.spec.num_drafts > 0
    seen.clear()
    count_readings(hf_engine, seen.append).read(page.image, settings)
    assert len(seen) == 1  # an engine that reads whole pages: once per page


def test_errors_are_one_alert_with_the_messages_as_text():
    assert errors_html([]) == ""
    alert = errors_html(["<b>.pdf: corrupt PDF, cannot be opened", "x.png: empty file (0 bytes)"])
    assert alert.startswith('<div class="ocr-errors" role="alert"><strong>2 errors</strong>')
    assert "<li>&lt;b&gt;.pdf: corrupt PDF, cannot be opened</li><li>x.png: empty file (0 bytes)</li>" in alert


def test_an_abandoned_request_frees_the_engine(hf_engine, tiny_preset, tmp_path):
    planned, _ = plan_documents([Upload(SAMPLE_PDF)], job_for(tiny_preset), max_pages=10)
    reading = Reading(model=tiny_preset.name, engine="hf", mode="low-latency", drafts=0)
    lock = threading.Lock()
    updates = run_reading(planned, hf_engine, lock, reading, tmp_path)
    next(updates)
    updates.close()  # what Gradio does when the browser goes away
    assert lock.acquire(timeout=60), "the worker kept the engine after its request was abandoned"


def test_figures_show_acceptance_per_position_and_mean_acceptance_length(tmp_path):
    spec = SpecDecodingStats()
    for accepted in (3, 1, 0, 2):  # four drafts of 3 tokens
        spec.observe_draft(3, accepted)
    page = PageMetrics(prompt_tokens=100, output_tokens=10, wall_s=0.5, finish_reason="stop", drafts=3, spec=spec)
    upload = Upload(tmp_path / "fatura.pdf")
    reading = Reading(model="m", engine="vllm", mode="low-latency", drafts=3)
    reading.pages["fatura.pdf · page 1"] = PageEntry(upload, "fatura.pdf · page 1", 1, text="x", metrics=page)
    document_metrics = RunMetrics(wall_s=0.5)
    document_metrics.observe_page(page)
    reading.documents.append(DocumentEntry(upload, "fatura.pdf", 1, document_metrics, done=True))

    figures = figures_markdown(reading)

    # 6 accepted tokens over 4 drafts: mean acceptance length 1 + 6/4; position 1 accepted in 3 drafts, 2 in 2, 3 in 1.
    assert "| fatura.pdf · page 1 | 10 | 0.50 | 20.0 | stop | 3 | 2.50 | 3 / 2 / 1 of 4 |" in figures
    assert "| fatura.pdf | 1/1 | 0.50 | 2.00 | 20.0 | vllm | 3 | 2.50 | 3 / 2 / 1 of 4 |" in figures
