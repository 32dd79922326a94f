"""Rebuild samples/real-tr's PDFs from their sources: each listed source file, read at its recorded commit from a
local git snapshot of its repository, checked against its recorded SHA-256, cut to the recorded pages.  A document
with a `stylesheet` (an e-Fatura's UBL-TR XML) is first rendered to PDF by the command the manifest records
(xsltproc, then headless Chromium's print to PDF), with the stylesheet read and checked the same way.

    python benchmarks/cut_real_tr.py --snapshots /work/.mirror [--root samples/real-tr] [--only invoice/x.pdf ...]

A snapshot of `owner/name` is looked for as SNAPSHOTS/owner+name/repo (a bare git directory or a checkout).
A rendered PDF is not byte-identical from one run to the next (Chromium stamps the time, fonts are the machine's):
its text layer is what must not change.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pymupdf

from ocr_app.errors import OcrError
from ocr_app.manifests import rebuild_pdfs
from ocr_app.realbench import DEFAULT_ROOT, read_manifest


def cut(data: bytes, pages: list[int]) -> bytes:
    """`data` cut to `pages` (1-based), nothing else changed."""
    with pymupdf.open(stream=data, filetype="pdf") as source, pymupdf.open() as kept:
        for number in pages:
            kept.insert_pdf(source, from_page=number - 1, to_page=number - 1)
        return kept.tobytes(garbage=4, deflate=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=Path, required=True)
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    parser.add_argument("--only", nargs="+", metavar="FILE", help="rebuild only these files (as the manifest names them)")
    args = parser.parse_args()
    try:
        for document in rebuild_pdfs(read_manifest(args.root), args.snapshots, args.root, cut, args.only):
            print(f"{document.file}: pages {document.pages} of {document.repo}:{document.path}")
    except OcrError as exc:
        sys.exit(str(exc))


if __name__ == "__main__":
    main()
