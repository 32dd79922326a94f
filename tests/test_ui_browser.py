"""`ocr-ui` in a real browser: Debian's headless Chromium driven by Playwright, the tiny model, the hf engine."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .conftest import SAMPLE_PDF
from ocr_app.config import load_mode_preset, load_model_preset
from ocr_app.documents import open_document
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.engines.hf import HFEngine
from ocr_app.errors import InputError
from ocr_app.outputs import DocumentResult, render_markdown
from ocr_app.pipeline import ReadJob, read_documents
from ui.testing import READ_TIMEOUT_MS, choose_page, find_chromium, launch_chromium, read_in_page, serve

pytestmark = pytest.mark.slow
CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip(
        "Chromium not found at /usr/bin/chromium: `make test` installs it when run as root "
        "(apt-get install -y chromium chromium-driver)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect


@pytest.fixture(scope="module")
def ui_url(predictable_model_dir, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("ocr-ui-browser")
    with serve(predictable_model_dir, workdir, "--max-upload-mb", "1") as url:
        yield url


@pytest.fixture(scope="module")
def expected(predictable_model_dir) -> DocumentResult:
    """The sample as `ocr-read --drafts 0` reads it, with the same model."""
    preset = load_model_preset(predictable_model_dir)
    engine = HFEngine(preset)
    settings = GenerationSettings(max_tokens=preset.max_tokens, drafts=0)
    job = ReadJob(model=preset, mode=load_mode_preset("low-latency"), settings=settings)
    [result] = read_documents([SAMPLE_PDF], engine, job)
    engine.close()
    return result


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = launch_chromium(playwright, CHROMIUM)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, ui_url):
    """A fresh visitor; records every request that leaves the server (there must be none)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    tab = context.new_page()
    tab.elsewhere = []
    tab.on("request", lambda request: None if request.url.startswith(ui_url) else tab.elsewhere.append(request.url))
    tab.goto(ui_url)
    yield tab
    context.close()


def raw_text(page) -> str:
    """The raw text, in its tab beside the rendered Markdown (Gradio renders a tab once it is opened)."""
    page.get_by_role("tab", name="Raw text").click()
    return page.locator("#page-raw textarea").input_value()


def download(page, name: str, folder: Path) -> Path:
    with page.expect_download() as info:
        page.locator(f"#downloads a[download='{name}']").click()
    target = folder / name
    info.value.save_as(target)
    return target


def test_reads_the_sample_pdf(page, expected, tmp_path):
    progress = read_in_page(page, [SAMPLE_PDF], drafts=0)

    assert progress.startswith("Done: 2 pages from 1 document") and page.get_by_role("alert").count() == 0
    page_texts = [p.text for p in expected.pages]
    rendered = page.locator("#page-markdown").inner_text()
    longest_word = max(re.findall(r"\w+", page_texts[1]), key=len)
    assert longest_word in rendered
    assert raw_text(page) == page_texts[1]  # the view follows the page being read: the last one
    choose_page(page, "fatura.pdf · page 1")
    page.wait_for_function("text => document.querySelector('#page-raw textarea').value === text", arg=page_texts[0])
    assert page.locator("#page-image img").count() == 1

    figures = page.locator("#figures").inner_text()
    for cell in ("fatura.pdf · page 1", "fatura.pdf · page 2", "tok/s", "pages/s", "hf"):
        assert cell in figures
    assert page.locator("#figures table").count() == 2  # Markdown tables render as tables

    markdown = download(page, "fatura.md", tmp_path)
    assert markdown.read_text(encoding="utf-8") == render_markdown(expected)
    saved = json.loads(download(page, "fatura.json", tmp_path).read_text(encoding="utf-8"))
    assert saved["source"] == "fatura.pdf" and [p["text"] for p in saved["pages"]] == page_texts

    page.screenshot(path=tmp_path / "ui.png", full_page=True)
    assert (tmp_path / "ui.png").stat().st_size > 10_000
    assert page.elsewhere == [], "the page fetched something from outside the server"


def test_bulk_mode_shows_progress_while_nothing_is_done(page, expected):
    page.get_by_label("bulk").check()
    page.locator("#pages input, #pages textarea").first.fill("1")
    page.locator("#uploads input[type=file]").set_input_files([str(SAMPLE_PDF)])
    page.locator("#uploaded").filter(has_text="fatura.pdf").wait_for()
    page.locator("#read").click()

    # Before the page is done: the page's image, where the read stands, and no way to press Read again.
    page.wait_for_function(
        """() => document.querySelector('#progress').innerText.startsWith('Reading in bulk: 0 of 1 page done')
            && document.querySelector('#progress progress') && document.querySelector('#page-image img')
            && document.querySelector('#read').disabled""",
        timeout=READ_TIMEOUT_MS,
    )

    page.locator("#progress").filter(has_text="Done: 1 page from 1 document").wait_for(timeout=READ_TIMEOUT_MS)
    assert re.search(r"\d+ tokens · [\d.]+ tok/s · 2 drafts: mean acceptance length [\d.]+", page.locator("#progress").inner_text())
    assert raw_text(page) == expected.pages[0].text
    expect(page.locator("#read")).to_be_enabled()


def test_bad_uploads_show_the_library_message_as_an_error_then_a_good_file_reads(page, expected, tmp_path):
    bad = {"broken.pdf": b"%PDF-1.7\n" + bytes(range(256)) * 8, "empty.png": b"", "notes.txt": b"not a document"}
    messages = []
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(InputError) as caught:
            open_document(tmp_path / name)
        messages.append(str(caught.value).replace(str(tmp_path / name), name))

    progress = read_in_page(page, [tmp_path / name for name in bad], drafts=0)
    assert progress == "Nothing was read."
    alert = page.get_by_role("alert")
    assert alert.locator("li").all_inner_texts() == messages
    assert "broken.pdf: corrupt PDF, cannot be opened" in messages
    # Shown as an error: the theme's error colours, above the progress line.
    assert alert.evaluate("e => getComputedStyle(e).color") != page.locator("#progress").evaluate("e => getComputedStyle(e).color")
    assert alert.bounding_box()["y"] < page.locator("#progress").bounding_box()["y"]

    page.locator("#uploads button[aria-label='Clear']").click()
    big = tmp_path / "big.pdf"
    big.write_bytes(SAMPLE_PDF.read_bytes() + b"\0" * 1024 * 1024)
    page.locator("#uploads input[type=file]").set_input_files([str(big)])
    page.get_by_text('File(s) exceed the maximum allowed size of 1.0 Mb: "big.pdf"').wait_for()

    page.locator("#pages input, #pages textarea").first.fill("1")
    progress = read_in_page(page, [SAMPLE_PDF], drafts=0)
    assert progress.startswith("Done: 1 page from 1 document") and alert.count() == 0
    assert raw_text(page) == expected.pages[0].text
