"""The training corpus of real born-digital Turkish PDFs (`ocr_app/train_ocr/corpus/`), kept apart from every benchmark.

The folder holds PDFs cut to a few pages each and a manifest, `sources.toml`, with one `[[document]]` per PDF:
where it was taken from (repository, path, commit, SHA-256 of the source file), the source pages kept, the
fonts its text uses, the licence that allows it here, and whether it is held out (read in the periodic
evaluation, never trained on).  An invoice made from an e-Fatura's UBL-TR XML also records the XSLT it was
rendered through and the command that printed it (`manifests.Stylesheet`); its pages are the rendered PDF's.  Its pages become band samples through `textlayer` (the `real` level).

Nothing may come from the real-document benchmark's source repositories or files (`samples/real-tr`, its
stylesheets included), nor from the repositories kept for an independent evaluation (`EVALUATION_REPOS`);
`tests/test_train_corpus.py` checks it.

    python -m ocr_app.train_ocr.corpus --snapshots /work/snapshots    # rebuild the PDFs from git snapshots
"""

from __future__ import annotations

import argparse
import string
import sys
import unicodedata
from pathlib import Path

import pymupdf
from pydantic import BaseModel, ConfigDict, Field

from ocr_app import manifests
from ocr_app.errors import OcrError
from ocr_app.manifests import Stylesheet, rebuild_pdfs

CORPUS_ROOT = Path(__file__).resolve().parent / "corpus"
# Public repositories whose documents are kept for an independent evaluation of this model (issue 21): used
# neither for training nor for the benchmark.
EVALUATION_REPOS = frozenset(repo.lower() for repo in (
    "uyumazelektrik/muhasebe", "CDinler/muhasebe-sistem", "binceler/go_web_programming",
    "YusufAlperGulden/Fatura_Okuma_Program-", "ozgurshahin/Show-Todays-Date", "ozanbabatas59/dilekcematik",
    "tuncerdabak/emlakimza", "senazisanyildiz-cyber/MersinEtkinZumre", "agyaglikci/tez",
))


# The gate a PDF passes before it enters the corpus (`gate_problems`).  Characters a Turkish page is written in:
# letters (the circumflexed vowels of loanwords included), digits, ASCII and typographic punctuation.
TURKISH_TEXT = frozenset(
    string.ascii_letters + string.digits + string.punctuation
    + "ÇĞİÖŞÜçğıöşüÂÎÛâîû" + "“”‘’«»–—…•·°§€₺½¼¾²³±×÷≤≥"
)
# At most this share of a PDF's non-space characters may lie outside `TURKISH_TEXT` (a symbol font's bullets, a
# stray foreign name); more means a broken encoding, or a page that is not Turkish text.
FOREIGN_SHARE = 0.004
# The letters a page of Turkish words cannot lack; their absence means they were mapped to ASCII or lost.
TURKISH_MARKS = frozenset("şğıİçöü")
# Marks that old TeX fonts and some PDF writers emit beside a base letter instead of one precomposed letter ("s¸").
LOOSE_ACCENTS = frozenset("¸˘˙¨˛´") | {chr(code) for code in range(0x300, 0x370)}
# A page with fewer non-space characters in its text layer has no text worth reading (a figure, a scan).
MIN_PAGE_CHARS = 40


class CorpusDocument(BaseModel):
    """One PDF of the corpus, as its manifest entry records it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str  # relative to the corpus folder
    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    path: str
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    source_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    pages: list[int] = Field(min_length=1)  # of the source (or of the PDF rendered from it), 1-based, in order
    fonts: str
    licence: str = Field(min_length=3)
    held_out: bool = False
    stylesheet: Stylesheet | None = None  # only for a PDF rendered from an XML source (an e-Fatura's UBL-TR)


def read_manifest(root: Path = CORPUS_ROOT) -> list[CorpusDocument]:
    """The documents `root/sources.toml` lists, whether or not their PDFs are there."""
    return manifests.read_manifest(root, CorpusDocument, "the training corpus")


def load_corpus(root: Path = CORPUS_ROOT) -> list[CorpusDocument]:
    """The documents `root/sources.toml` lists; each must be there."""
    return manifests.load_manifest(root, CorpusDocument, "the training corpus")


def corpus_pages(held_out: bool, root: Path = CORPUS_ROOT) -> list[tuple[Path, int]]:
    """(pdf, 1-based page) of every page of the training documents, or of the held-out ones."""
    pages = []
    for document in load_corpus(root):
        if document.held_out == held_out:
            with pymupdf.open(root / document.file) as pdf:
                pages += [(root / document.file, number) for number in range(1, pdf.page_count + 1)]
    return pages


def cut_pages(data: bytes, pages: list[int]) -> bytes:
    """The PDF `data` cut to `pages` (1-based), its fonts subset to the glyphs used: a two-page cut of a
    regulation embedding whole Times New Roman and Cambria fonts goes from ~450 KB to ~120 KB."""
    with pymupdf.open(stream=data, filetype="pdf") as source, pymupdf.open() as kept:
        for number in pages:
            kept.insert_pdf(source, from_page=number - 1, to_page=number - 1)
        kept.subset_fonts()
        return kept.tobytes(garbage=4, deflate=True)


def gate_problems(data: bytes) -> list[str]:
    """Why the PDF `data` may not enter the corpus (empty when it may): a Type3 font (glyphs drawn as curves,
    often with no usable text), a page without text, invisible text (an OCR layer under a scan), more than
    `FOREIGN_SHARE` of characters outside `TURKISH_TEXT`, Turkish letters missing (none of `TURKISH_MARKS`) or
    broken (a replacement character, a loose accent beside its letter)."""
    problems = []
    text = []
    with pymupdf.open(stream=data, filetype="pdf") as pdf:
        for index, page in enumerate(pdf):
            number = index + 1
            if any(font[2] == "Type3" for font in pdf.get_page_fonts(index)):
                problems.append(f"page {number}: a Type3 font")
            page_text = page.get_text()
            if sum(not char.isspace() for char in page_text) < MIN_PAGE_CHARS:
                problems.append(f"page {number}: no text layer")
            # texttrace type 3 is text drawn in render mode 3 (invisible), as OCR tools lay it under a scan.
            if any(span["type"] == 3 and span["chars"] for span in page.get_texttrace()):
                problems.append(f"page {number}: invisible text (an OCR layer?)")
            text.append(page_text)
    # NFKC spells ligatures out (fi, fl), as `textlayer` reads them.
    chars = [char for char in unicodedata.normalize("NFKC", "".join(text)) if not char.isspace()]
    foreign = sorted({char for char in chars if char not in TURKISH_TEXT})
    share = sum(char not in TURKISH_TEXT for char in chars) / max(1, len(chars))
    if share > FOREIGN_SHARE:
        problems.append(f"{share:.2%} of characters outside Turkish text: {''.join(foreign[:20])}")
    if not TURKISH_MARKS & set(chars):
        problems.append("no Turkish letters (ş ğ ı İ ç ö ü)")
    broken = sorted(set(chars) & (LOOSE_ACCENTS | {"\ufffd"}))
    if broken:
        problems.append(f"broken letters: {' '.join(repr(char) for char in broken)}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description="Rebuild the training corpus's PDFs from git snapshots of their sources.")
    parser.add_argument("--snapshots", type=Path, required=True, help="folder of OWNER+NAME/repo git directories")
    parser.add_argument("--root", type=Path, default=CORPUS_ROOT)
    parser.add_argument("--only", nargs="+", metavar="FILE", help="rebuild only these files (as the manifest names them)")
    args = parser.parse_args()
    try:
        for document in rebuild_pdfs(read_manifest(args.root), args.snapshots, args.root, cut_pages, args.only):
            print(f"{document.file}: pages {document.pages} of {document.repo}:{document.path}")
    except OcrError as exc:
        sys.exit(str(exc))


if __name__ == "__main__":
    main()
