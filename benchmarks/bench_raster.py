"""Rasterization speed and memory: is page rendering ever the bottleneck?

    python benchmarks/bench_raster.py [--pages 50] [--dpi 200] [--repeats 3]

Builds a text-heavy PDF of N A4 pages (Turkish paragraphs and a table per page),
then renders every page at the full DPI, and again fitted to the model's
pixel budget exactly as `ocr-read` does (`ocr_app.pages.iter_pages`, which
renders straight to the fitted size).  Prints pages/s (median of the repeats)
for both and the peak resident memory of the process, so the README can show
that pages stream rather than pile up.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import pymupdf

from ocr_app.config import load_model_preset
from ocr_app.documents import open_document
from ocr_app.pages import render_pdf_pages, iter_pages

PARAGRAPH = (
    "Sayın müşterimiz, 14 Kasım 2026 tarihli siparişiniz Kadıköy şubemizden gönderilmiştir. "
    "Ödemenizi fatura tarihinden itibaren otuz gün içinde yapmanızı rica ederiz. Işıl Güneş, Çağrı Öz. "
)


def build_pdf(path: Path, pages: int) -> None:
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        page = doc.new_page(width=595, height=842)
        page.insert_textbox(pymupdf.Rect(50, 50, 545, 500), f"Sayfa {number}\n\n" + PARAGRAPH * 8, fontsize=10)
        for row in range(12):
            page.insert_text((50, 520 + row * 20), f"Ürün {row:02d}    {row + 1} adet    {row * 17.5:,.2f} TL", fontsize=10)
    doc.save(path)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="qwen3.5-2b-ocr-tr", help="preset whose pixel budget is used")
    args = parser.parse_args()

    budget = load_model_preset(args.model).pixels
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.pdf"
        build_pdf(path, args.pages)
        document = open_document(path)
        numbers = list(range(1, args.pages + 1))
        rss_before = peak_rss_mib()

        render_rates, fitted_rates = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            for _image in render_pdf_pages(document, numbers, args.dpi):
                pass
            render_rates.append(args.pages / (time.perf_counter() - started))
            started = time.perf_counter()
            for _page in iter_pages(document, numbers, budget, args.dpi):
                pass
            fitted_rates.append(args.pages / (time.perf_counter() - started))

    print(f"{args.pages}-page PDF at {args.dpi} dpi, budget {budget.min_pixels}-{budget.max_pixels} px ({args.model})")
    print(f"render at full dpi : {statistics.median(render_rates):6.1f} pages/s (median of {args.repeats})")
    print(f"render to budget   : {statistics.median(fitted_rates):6.1f} pages/s (median of {args.repeats})")
    print(f"peak RSS           : {peak_rss_mib():6.0f} MiB (before rendering: {rss_before:.0f} MiB)")


if __name__ == "__main__":
    main()
