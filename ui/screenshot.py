"""Screenshot of the UI reading the sample invoice, for the README.

    python -m ui.screenshot docs/ui.png

Serves `ocr-ui` with the tiny offline model (random weights: its text is noise,
the page around it is real), reads `samples/fatura.pdf` in headless Chromium,
and saves a palette PNG to keep the file small.
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
from pathlib import Path

from PIL import Image

from ocr_app.testing.tiny_model import build_tiny_model
from ui.testing import PROJECT_ROOT, choose_page, find_chromium, launch_chromium, read_in_page, serve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("error: Chromium not found (apt-get install -y chromium)")
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="ocr-ui-shot-") as work:
        model_dir = build_tiny_model(Path(work) / "tiny-predictable", seed=1, predictable=True)
        with serve(model_dir, Path(work)) as url, sync_playwright() as playwright:
            browser = launch_chromium(playwright, chromium)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            read_in_page(page, [PROJECT_ROOT / "samples" / "fatura.pdf"], drafts=0)
            choose_page(page, "fatura.pdf · page 1")
            page.wait_for_timeout(500)
            png = page.screenshot(full_page=True)
            browser.close()
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=128)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    image.save(args.out, optimize=True)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
