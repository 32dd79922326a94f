"""Screenshot of the UI reading a document with a real model, for the README and docs/ui.md.

    python -m ui.screenshot samples/fatura.pdf docs/ui.png

Serves `ocr-ui` (hf engine) with the model given (by default the shipped
default model), reads the document in headless Chromium at 1280 px wide with
the mode's own drafts, shows its first page once the read is over, and saves a
palette PNG of the whole page to keep the file small.  On two CPU cores a
two-page invoice takes about two minutes.
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
from pathlib import Path

from PIL import Image

from ocr_app.config import default_model_name
from ocr_app.documents import open_document, parse_page_range
from ocr_app.errors import OcrError
from ui.reading import page_label
from ui.testing import choose_page, find_chromium, launch_chromium, read_in_page, serve

VIEWPORT = {"width": 1280, "height": 900}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("document", type=Path, help="PDF or image to read")
    parser.add_argument("out", type=Path, help="PNG to write, e.g. docs/ui.png")
    parser.add_argument("--model", default=None, help="model preset name or folder; default: the default model")
    parser.add_argument("--pages", default="", help="pages to read (PDFs), e.g. 1-2; default all")
    args = parser.parse_args()
    try:
        numbers = parse_page_range(args.pages or None, open_document(args.document).page_count)
    except OcrError as exc:
        raise SystemExit(f"error: {exc}") from None
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("error: Chromium not found (make browser, or apt-get install -y chromium)")
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    from playwright.sync_api import sync_playwright

    with (
        tempfile.TemporaryDirectory(prefix="ocr-ui-shot-") as work,
        serve(args.model or default_model_name(), Path(work)) as url,
        sync_playwright() as playwright,
    ):
        browser = launch_chromium(playwright, chromium)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(url)
        if args.pages:
            page.locator("#pages input, #pages textarea").first.fill(args.pages)
        print(read_in_page(page, [args.document.resolve()], drafts=None))
        if len(numbers) > 1:  # the view follows the page being read: back to the first
            choose_page(page, page_label(args.document.name, numbers[0]))
        page.wait_for_timeout(500)
        png = page.screenshot(full_page=True)
        browser.close()
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=128)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    image.save(args.out, optimize=True)
    print(f"wrote {args.out} ({image.width}x{image.height}, {args.out.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
