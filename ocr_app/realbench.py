"""The real-document benchmark: public Turkish PDFs whose own text layer is the truth, read born-digital and scanned.

A benchmark folder (`samples/real-tr`) holds PDFs in one folder per category and a manifest, `sources.toml`,
with one `[[document]]` per PDF: where it was taken from (repository, path, commit, SHA-256 of the source
file), which source pages were kept, and the licence that allows it here.  Every page of every PDF is a
benchmark page, in two renderings:

* born-digital: the PDF page rendered as `ocr-read` renders it;
* scanned: the same page as if printed and scanned (`scan_image`), drawn from a seed and the page's id, so the
  same page always gets the same scan and nothing needs storing.

The truth of both is the page's text layer (`text_layer`).  `benchmark_sources` lists the repositories and
file hashes the benchmark comes from, so that training-data code can prove it never uses them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image
from pydantic import BaseModel, ConfigDict, Field

from ocr_app import manifests
from ocr_app.config import PROJECT_ROOT, PixelBudget
from ocr_app.documents import open_document
from ocr_app.errors import InputError
from ocr_app.manifests import Stylesheet
from ocr_app.pages import fit_image, iter_pages, render_pdf_pages
from ocr_app.scoring import PageScore, matched_line_cer, plain_lines, plain_text, score_page, word_f1
from ocr_app.synth.degrade import degrade
from ocr_app.tob import BenchmarkPage, select_pages

DEFAULT_ROOT = PROJECT_ROOT / "samples" / "real-tr"
BORN_DIGITAL, SCANNED = "born-digital", "scanned"
RENDERINGS = (BORN_DIGITAL, SCANNED)
SCAN_SEED = "real-tr-scan-v1"  # change it and every scan changes: figures are only comparable under one seed
SCAN_DPIS = (150, 200, 250, 300)
SCAN_SKEW_DEG = (1.0, 2.0)  # magnitude; the sign is drawn too
SCAN_PAPER_GREY = (200, 235)  # the paper's level, 255 = white


class RealDocument(BaseModel):
    """One PDF of the benchmark, as its manifest entry records it: a PDF taken from a repository, or one rendered
    from a repository's XML source through `stylesheet` (then `pages` are pages of the rendered PDF)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str  # relative to the benchmark folder; its folder is the category
    title: str
    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    path: str
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    source_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    pages: list[int] = Field(min_length=1)
    licence: str = Field(min_length=3)
    stylesheet: Stylesheet | None = None

    @property
    def category(self) -> str:
        return Path(self.file).parent.as_posix()


def read_manifest(root: Path = DEFAULT_ROOT) -> list[RealDocument]:
    """The documents `root/sources.toml` lists, whether or not their PDFs are there yet."""
    return manifests.read_manifest(root, RealDocument, "a real-document benchmark")


def load_manifest(root: Path = DEFAULT_ROOT) -> list[RealDocument]:
    """The documents `root/sources.toml` lists; each listed PDF must exist."""
    return manifests.load_manifest(root, RealDocument, "a real-document benchmark")


@dataclass(frozen=True)
class BenchmarkSources:
    """What the benchmark is made of, for keeping it out of training data."""

    repos: frozenset[str]  # owner/name, lower case (GitHub names are case-insensitive)
    sha256: frozenset[str]  # of each source file and of each PDF in the benchmark folder

    def holds_repo(self, repo: str) -> bool:
        return repo.lower() in self.repos

    def holds_file(self, path: Path) -> bool:
        return manifests.sha256_file(path) in self.sha256


def benchmark_sources(root: Path = DEFAULT_ROOT) -> BenchmarkSources:
    documents = load_manifest(root)
    stylesheets = [document.stylesheet for document in documents if document.stylesheet is not None]
    return BenchmarkSources(
        repos=frozenset(document.repo.lower() for document in documents)
        | frozenset(stylesheet.repo.lower() for stylesheet in stylesheets),
        sha256=frozenset(document.source_sha256 for document in documents)
        | frozenset(stylesheet.sha256 for stylesheet in stylesheets)
        | frozenset(manifests.sha256_file(root / document.file) for document in documents),
    )


def text_layer(path: Path) -> list[str]:
    """Each page's text as PyMuPDF extracts it, in the PDF's own order (a table's cells one per line, row by row)."""
    with pymupdf.open(path) as pdf:
        return [page.get_text() for page in pdf]


def scan_image(pdf: Path, number: int, seed: str) -> Image.Image:
    """Page `number` of `pdf` as if printed and scanned, the same for the same `seed`: rendered at a scanner's
    resolution (150-300 dpi), paper grey, turned 1-2 degrees either way, then blurred, grained and saved as JPEG
    (`synth.degrade`'s "scan" level without its own rotation)."""
    rng = random.Random(seed)
    dpi = rng.choice(SCAN_DPIS)
    (image,) = render_pdf_pages(open_document(pdf), [number], dpi)
    paper = rng.uniform(*SCAN_PAPER_GREY)
    shading = np.linspace(rng.uniform(-8, 8), rng.uniform(-8, 8), image.width, dtype=np.float32)  # uneven lamp
    pixels = np.asarray(image, dtype=np.float32) * (paper / 255.0) + shading[None, :, None]  # [H, W, 3]
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="RGB")
    angle = rng.uniform(*SCAN_SKEW_DEG) * rng.choice((-1, 1))
    image = image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=(round(paper),) * 3)
    return degrade(image, "scan", rng, turn=False)


@dataclass(frozen=True)
class RealPage(BenchmarkPage):
    rendering: str = BORN_DIGITAL  # one of RENDERINGS


def _page_loader(pdf: Path, number: int, rendering: str, page_id: str):
    def load(budget: PixelBudget) -> Image.Image:
        if rendering == SCANNED:
            return fit_image(scan_image(pdf, number, f"{SCAN_SEED}:{page_id}"), budget)
        return next(iter_pages(open_document(pdf), [number], budget)).image  # as `ocr-read` renders it

    return load


def load_real_benchmark(root: Path = DEFAULT_ROOT, renderings: tuple[str, ...] = RENDERINGS,
                        categories: tuple[str, ...] | None = None) -> list[RealPage]:
    """Every page of every listed PDF (of `categories`, default all) in each rendering; a page id is
    `<rendering>/<file without .pdf>/p<N>`, so a page and its scan are the same in any selection."""
    unknown = [name for name in renderings if name not in RENDERINGS]
    if unknown or not renderings:
        raise InputError(f"renderings must be among {', '.join(RENDERINGS)}, got {', '.join(renderings) or 'none'}")
    documents = load_manifest(root)
    if categories is not None:
        missing = sorted(set(categories) - {document.category for document in documents})
        if missing or not categories:
            raise InputError(f"{root}: no category {', '.join(missing) or '(none given)'}")
        documents = [document for document in documents if document.category in categories]
    pages = []
    for rendering in renderings:
        for document in documents:
            pdf = root / document.file
            for number, reference in enumerate(text_layer(pdf), start=1):
                page_id = f"{rendering}/{Path(document.file).with_suffix('').as_posix()}/p{number}"
                pages.append(RealPage(id=page_id, category=document.category, reference=reference, source=str(pdf),
                                      load=_page_loader(pdf, number, rendering, page_id), rendering=rendering))
    return pages


# Scores: each reading against its page's text layer, order-robust measures beside the order-sensitive CER.


@dataclass(frozen=True)
class TextLayerScore:
    word_f1: float
    word_precision: float
    word_recall: float
    line_cer: float  # truth lines against their best-matching reading lines, in any order
    cer: float  # the whole page in reading order (`scoring.score_page`)

    def to_dict(self) -> dict:
        return {name: round(value, 5) for name, value in self.__dict__.items()}


def score_text_layer(reading: str, reference: str) -> TextLayerScore:
    """A reading (Markdown or plain text) against a page's text layer; both sides lose Markdown structure first."""
    words = word_f1(plain_text(reading), plain_text(reference))
    return TextLayerScore(
        word_f1=words.f1,
        word_precision=words.precision,
        word_recall=words.recall,
        line_cer=matched_line_cer(plain_lines(reading), plain_lines(reference)),
        cer=score_page(plain_text(reading), plain_text(reference)).cer,
    )


def text_layer_scorer(prediction: str, reference: str) -> PageScore:
    """The order-sensitive `PageScore` of a reading against a text layer, for the shared evaluation runs."""
    return score_page(plain_text(prediction), plain_text(reference))


def mean_score(scores: list[TextLayerScore]) -> TextLayerScore:
    count = len(scores)
    if not count:
        raise ValueError("no scores to average")
    return TextLayerScore(*(sum(getattr(s, name) for s in scores) / count for name in TextLayerScore.__dataclass_fields__))


@dataclass(frozen=True)
class GroupScore:
    rendering: str
    category: str  # ALL for every category of the rendering (mean over its pages)
    pages: int
    score: TextLayerScore


ALL = "all"


def group_scores(pages: list[RealPage], scores: dict[str, TextLayerScore]) -> list[GroupScore]:
    """Page means per (rendering, category), then per rendering over all its pages; renderings in RENDERINGS'
    order, categories sorted."""
    groups = []
    for rendering in RENDERINGS:
        chosen = [page for page in pages if page.rendering == rendering]
        for category in sorted({page.category for page in chosen}):
            members = [scores[page.id] for page in chosen if page.category == category]
            groups.append(GroupScore(rendering, category, len(members), mean_score(members)))
        if chosen:
            groups.append(GroupScore(rendering, ALL, len(chosen), mean_score([scores[page.id] for page in chosen])))
    return groups


def _page_key(page: RealPage) -> str:
    return page.id.split("/", 1)[1]  # the id without its rendering


def select_real_pages(pages: list[RealPage], every: int = 1, limit: int | None = None) -> list[RealPage]:
    """`tob.select_pages` on the pages of one rendering, then those same pages in every rendering, so that
    born-digital and scanned figures always cover the same pages."""
    first = pages[0].rendering
    chosen = {_page_key(page) for page in select_pages([p for p in pages if p.rendering == first], every, limit)}
    return [page for page in pages if _page_key(page) in chosen]
