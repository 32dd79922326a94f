"""`ocr-ui` driven through its API with gradio_client: a real server, the tiny model, the hf engine."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import httpx
import pytest

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
from gradio_client import Client, handle_file  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from .conftest import SAMPLE_PDF  # noqa: E402
from ocr_app.config import PixelBudget, load_mode_preset, load_model_preset  # noqa: E402
from ocr_app.documents import open_document  # noqa: E402
from ocr_app.engines.protocol import GenerationSettings  # noqa: E402
from ocr_app.engines.hf import HFEngine  # noqa: E402
from ocr_app.outputs import render_markdown  # noqa: E402
from ocr_app.pages import iter_pages  # noqa: E402
from ocr_app.pipeline import ReadJob, read_documents  # noqa: E402
from ui.testing import serve  # noqa: E402

pytestmark = pytest.mark.slow
MAX_PAGES = 3
MAX_UPLOAD_MB = 1.0
# /read's outputs, in order (the session state is not part of the API).
ERRORS, PROGRESS, PAGE, IMAGE, RENDERED, RAW, FIGURES, DOWNLOADS = range(8)


@pytest.fixture(scope="module")
def ui_url(predictable_model_dir, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("ocr-ui-api")
    with serve(predictable_model_dir, workdir, "--max-pages", str(MAX_PAGES), "--max-upload-mb", str(MAX_UPLOAD_MB)) as url:
        yield url
    leftovers = list(workdir.glob("ocr-ui-*"))
    assert leftovers == [], f"ocr-ui left temporary files behind: {leftovers}"


@pytest.fixture(scope="module")
def letter_png(tmp_path_factory) -> Path:
    """Page 2 of the sample as a phone-photo-like PNG upload."""
    path = tmp_path_factory.mktemp("uploads") / "letter.png"
    budget = PixelBudget(min_pixels=32 * 32, max_pixels=800 * 1100)
    next(iter_pages(open_document(SAMPLE_PDF), [2], budget, 100)).image.save(path)
    return path


@pytest.fixture(scope="module")
def expected_markdown(predictable_model_dir, letter_png) -> dict[str, str]:
    """What `ocr-read --drafts 0` writes for each upload, computed here with the same model."""
    preset = load_model_preset(predictable_model_dir)
    engine = HFEngine(preset)
    job = ReadJob(
        model=preset,
        mode=load_mode_preset("low-latency"),
        settings=GenerationSettings(max_tokens=preset.max_tokens, drafts=0),
    )
    expected = {}
    for path in (SAMPLE_PDF, letter_png):
        [result] = read_documents([path], engine, job)
        expected[path.name] = render_markdown(result)
    engine.close()
    return expected


def read(client: Client, *paths: Path, pages: str = "", mode: str = "low-latency", drafts: int = 0, dpi: int = 200):
    return client.predict([handle_file(str(p)) for p in paths], pages, mode, drafts, dpi, api_name="/read")


def downloads(outputs) -> dict[str, Path]:
    return {Path(item).name: Path(item) for item in outputs[DOWNLOADS]}


def test_two_clients_at_once_each_get_their_own_upload(ui_url, letter_png, expected_markdown):
    barrier = threading.Barrier(2)
    results: dict[str, tuple] = {}

    def client_reads(path: Path) -> None:
        client = Client(ui_url, verbose=False)
        barrier.wait()
        results[path.name] = read(client, path)

    threads = [threading.Thread(target=client_reads, args=(path,)) for path in (SAMPLE_PDF, letter_png)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert set(results) == {"fatura.pdf", "letter.png"}

    pdf_files = downloads(results["fatura.pdf"])
    png_files = downloads(results["letter.png"])
    assert set(pdf_files) == {"fatura.md", "fatura.json"}
    assert set(png_files) == {"letter.md", "letter.json"}
    assert pdf_files["fatura.md"].read_text(encoding="utf-8") == expected_markdown["fatura.pdf"]
    assert png_files["letter.md"].read_text(encoding="utf-8") == expected_markdown["letter.png"]
    pdf_json = json.loads(pdf_files["fatura.json"].read_text(encoding="utf-8"))
    png_json = json.loads(png_files["letter.json"].read_text(encoding="utf-8"))
    assert (pdf_json["source"], [p["page"] for p in pdf_json["pages"]]) == ("fatura.pdf", [1, 2])
    assert (png_json["source"], [p["page"] for p in png_json["pages"]]) == ("letter.png", [1])
    assert {key: pdf_json[key] for key in ("engine", "mode", "drafts")} == {"engine": "hf", "mode": "low-latency", "drafts": 0}
    for outputs in results.values():
        assert outputs[PROGRESS].startswith("Done:") and outputs[ERRORS] == ""


def test_low_latency_streams_text_as_it_is_produced(ui_url):
    client = Client(ui_url, verbose=False)
    job = client.submit([handle_file(str(SAMPLE_PDF))], "1", "low-latency", 0, 200, api_name="/read")
    final = job.result(timeout=300)
    page_text = final[RAW]
    assert page_text
    shown = [outputs[RAW] for outputs in job.outputs() if isinstance(outputs[RAW], str)]
    assert all(page_text.startswith(text) for text in shown), "every update shows a prefix of the page's text"
    assert any(0 < len(text) < len(page_text) for text in shown), "no partial text was ever shown"


def test_bulk_mode_reads_all_pages(ui_url, expected_markdown):
    job = Client(ui_url, verbose=False).submit([handle_file(str(SAMPLE_PDF))], "", "bulk", 2, 200, api_name="/read")
    outputs = job.result(timeout=300)
    assert downloads(outputs)["fatura.md"].read_text(encoding="utf-8") == expected_markdown["fatura.pdf"]
    assert "fatura.pdf · page 2" in outputs[FIGURES] and "| hf |" in outputs[FIGURES]
    first = job.outputs()[0]
    assert first[PROGRESS].startswith("Reading in bulk: 0 of 2 pages done") and first[PAGE]["value"] == "fatura.pdf · page 1"
    assert "2 drafts: mean acceptance length" in outputs[PROGRESS]


def test_page_limit_is_a_clear_message(ui_url):
    outputs = read(Client(ui_url, verbose=False), SAMPLE_PDF, SAMPLE_PDF)
    message = f"4 pages to read, over this server's limit of {MAX_PAGES} per request; choose fewer pages"
    assert f"<li>{message}</li>" in outputs[ERRORS] and outputs[PROGRESS] == "Nothing was read."
    assert outputs[DOWNLOADS] == []


@pytest.mark.parametrize(("setting", "value", "limit"), [("dpi", 5000, 400), ("drafts", 9, 7)])
def test_settings_out_of_range_are_refused(ui_url, setting, value, limit):
    with pytest.raises(AppError, match=f"Value {value} is greater than maximum value {limit}"):
        read(Client(ui_url, verbose=False), SAMPLE_PDF, **{setting: value})


def test_a_bad_page_range_is_the_library_message(ui_url):
    outputs = read(Client(ui_url, verbose=False), SAMPLE_PDF, pages="3-1")
    assert "<li>bad page range '3-1': '3-1' is empty or starts below 1</li>" in outputs[ERRORS]
    assert outputs[DOWNLOADS] == []


def test_page_range_reads_only_those_pages(ui_url):
    outputs = read(Client(ui_url, verbose=False), SAMPLE_PDF, pages="2")
    assert outputs[PROGRESS].startswith("Done: 1 page from 1 document")
    saved = json.loads(downloads(outputs)["fatura.json"].read_text(encoding="utf-8"))
    assert [page["page"] for page in saved["pages"]] == [2]


def test_oversized_upload_is_refused(ui_url, tmp_path):
    big = tmp_path / "big.pdf"
    big.write_bytes(b"%PDF-1.7\n" + b"0" * int(MAX_UPLOAD_MB * 1024 * 1024 * 2))
    with pytest.raises(Exception, match="(?i)size|large"):
        read(Client(ui_url, verbose=False), big)


def test_a_path_on_the_server_is_never_opened(ui_url):
    """The API names a file by path; one that was not uploaded is refused, and nothing of it comes back."""
    secret = Path(__file__).resolve()
    payload = {"data": [[{"path": str(secret), "meta": {"_type": "gradio.FileData"}}], "", "low-latency", 0, 200]}
    with httpx.Client(base_url=ui_url, timeout=60) as http:
        event_id = http.post("/gradio_api/call/read", json=payload).json()["event_id"]
        stream = http.get(f"/gradio_api/call/read/{event_id}").text
    assert "event: error" in stream
    assert "test_a_path_on_the_server_is_never_opened" not in stream
