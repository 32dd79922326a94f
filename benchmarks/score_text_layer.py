"""A born-digital PDF read by a model and by Tesseract, each page scored against the PDF's own text layer.

    python benchmarks/score_text_layer.py samples/fatura.pdf --model ocr-tiny-tr [--baseline tesseract]

The text layer (PyMuPDF's text in reading order; a table's cells one per line, row by row) is the
reference, so only words and their order are scored: the reading's Markdown is reduced to its words
(`scoring.plain_text`) first, and both sides are normalised as `ocr-eval` does (`scoring.score_page`).
This is how `samples/fatura.pdf`, which is not from the synthetic generator, gets a number. The model
reads with the preset's pages, bands and drafts as `ocr-read` does (transformers engine, no drafts).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ocr_app.baselines import tesseract
from ocr_app.cli.read import build_job
from ocr_app.config import PixelBudget
from ocr_app.documents import open_document
from ocr_app.engine_factory import make_engine, quiet_libraries
from ocr_app.pages import DEFAULT_DPI, iter_pages
from ocr_app.pipeline import read_documents
from ocr_app.realbench import text_layer
from ocr_app.scoring import plain_text, score_page


def model_pages(path: Path, model: str) -> list[str]:
    job = build_job(model, "bulk", 0, None, 0.0, None, DEFAULT_DPI, None)
    engine = make_engine("hf", job.model)
    (result,) = read_documents([path], engine, job)
    engine.close()
    return [page.text for page in result.pages]


def tesseract_pages(path: Path) -> list[str]:
    """At the PDF's rendering resolution, as `ocr-eval --baseline tesseract` gives it pages: no pixel budget."""
    document = open_document(path)
    unlimited = PixelBudget(min_pixels=1, max_pixels=10**9)
    return [tesseract.read_page(page.image) for page in iter_pages(document, list(range(1, document.page_count + 1)), unlimited)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdf", type=Path)
    parser.add_argument("--model", default="ocr-tiny-tr")
    parser.add_argument("--baseline", choices=["tesseract"])
    args = parser.parse_args()
    quiet_libraries()
    references = text_layer(args.pdf)
    readers = {args.model: model_pages(args.pdf, args.model)}
    if args.baseline:
        readers["Tesseract"] = tesseract_pages(args.pdf)
    print(f"| Reader ({args.pdf.name}, against its text layer) | Page | Score | CER | WER |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, pages in readers.items():
        for number, (reading, reference) in enumerate(zip(pages, references), start=1):
            score = score_page(plain_text(reading), reference)
            print(f"| {name} | {number} | {score.similarity:.2f} | {score.cer:.3f} | {score.wer:.3f} |")


if __name__ == "__main__":
    main()
