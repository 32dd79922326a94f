"""Band samples of real born-digital PDFs: a page rendered and cut as `ocr-read` cuts it, each part's answer the
words the PDF's own text layer places in it.

A page is rendered as `ocr-read` renders it (`pages.render_pdf_pages`: 200 dpi fitted to the model's pixel
budget, or to `regions.page_pixels`, the parts then taken from that larger page), its rules erased, and cut into bands and parts (a table row's cells, a long line's chunks) by the very
functions `regions.page_regions` uses; no deskew, a born-digital page is level.  Each word of the text layer
(`page.get_text("words")`, boxes in PDF points) is mapped to the page's pixels by the render's scale and given to
the band holding its box's middle row and the part holding its middle column.  A part is kept only when its
text is exact: every ink column of it lies under one of its words (no logo, signature or text drawn as
curves), each of its words has ink there (no hidden text) and lies inside it (no word its edge cuts).
A part's answer is its words in reading order, runs of bold words in `**`, a table's cell as `cell_text`
writes it, as the synthetic band samples are written (`synth.bands`).
"""

from __future__ import annotations

import random
import tempfile
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pymupdf
from PIL import Image

from ocr_app.config import PixelBudget, RegionSplit, page_budget
from ocr_app.documents import open_document
from ocr_app.pages import DEFAULT_DPI, render_pdf_pages
from ocr_app.regions import cell_text, fitted_page, page_bands, part_source
from ocr_app.regions.ink import ink_mask
from ocr_app.synth import story
from ocr_app.synth.bands import damaged_part

# Ink columns of a part no word covers: at most this share of its line's height (anti-aliased edges).
UNEXPLAINED_INK = 0.5
# A word's box is widened by this share of its height when it explains ink (italic overhangs, kerning).
WORD_SLACK = 0.15
# A word shows when at least this share of its columns hold ink in its band.
WORD_INKED = 0.2
# Every page of the corpus (174 pages, training and held out, ~15 MB each rendered at `page_pixels` with its
# fitted page, ~2.6 GB in all): a page costs ~0.5 s to render and cut at 1.1 MP, so a cache smaller than the
# corpus would render pages again and again; `tests/test_train_corpus.py` checks the corpus fits (2 pages spare).
PAGES_CACHED = 176


@dataclass(frozen=True)
class LayerWord:
    """A word of a page's text layer, its box in the rendered page's pixels and whether its font is bold."""

    left: float
    top: float
    right: float
    bottom: float
    text: str
    bold: bool

    @property
    def middle_row(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def middle_column(self) -> float:
        return (self.left + self.right) / 2


@dataclass(frozen=True)
class Part:
    """One image the reader reads of a page: rows top..bottom-1 and `columns` of the erased page, and its answer."""

    top: int
    bottom: int
    columns: tuple[int, int]
    text: str


@dataclass(frozen=True)
class CutPage:
    """A page rendered and cut: what its parts are taken from (the erased page, or a larger rendering of it
    `zoom` times its size: `regions.part_source`), its kept parts (in the cut page's pixels), and their
    enlargement."""

    image: Image.Image
    parts: tuple[Part, ...]
    scale: float
    bands: int  # how many bands the page was cut into, kept or not
    zoom: tuple[float, float] = (1.0, 1.0)


def _is_bold(font: str, flags: int) -> bool:
    return bool(flags & pymupdf.TEXT_FONT_BOLD) or any(mark in font for mark in ("Bold", "Black", "Heavy", "Semibold"))


def layer_words(page: pymupdf.Page, size: tuple[int, int]) -> list[LayerWord]:
    """The words of `page`'s text layer on its rendering `size` (width, height) px: NFKC text (ligatures
    spelled out), bold from the font of the span holding the word's middle."""
    scale_x, scale_y = size[0] / page.rect.width, size[1] / page.rect.height
    spans = [
        (pymupdf.Rect(span["bbox"]), _is_bold(span["font"], span["flags"]))
        for block in page.get_text("dict")["blocks"]
        for line in block.get("lines", ())
        for span in line["spans"]
        if span["text"].strip()
    ]
    words = []
    for x0, y0, x1, y1, text, *_ in page.get_text("words"):
        middle = pymupdf.Point((x0 + x1) / 2, (y0 + y1) / 2)
        bold = any(rect.contains(middle) and is_bold for rect, is_bold in spans)
        words.append(LayerWord(x0 * scale_x, y0 * scale_y, x1 * scale_x, y1 * scale_y,
                               unicodedata.normalize("NFKC", text), bold))
    return words


def words_text(words: list[LayerWord]) -> str:
    """The words in reading order (lines top to bottom, each left to right, joined by spaces), each run of bold
    words in `**`."""
    lines: list[list[LayerWord]] = []
    for word in sorted(words, key=lambda word: word.middle_row):
        if lines and word.middle_row - lines[-1][0].middle_row < 0.5 * (word.bottom - word.top):
            lines[-1].append(word)
        else:
            lines.append([word])
    ordered = [word for line in lines for word in sorted(line, key=lambda word: word.left)]
    runs: list[tuple[bool, list[str]]] = []
    for word in ordered:
        if runs and runs[-1][0] == word.bold:
            runs[-1][1].append(word.text)
        else:
            runs.append((word.bold, [word.text]))
    return " ".join(f"**{' '.join(texts)}**" if bold else " ".join(texts) for bold, texts in runs)


def _explained(inked: np.ndarray, words: list[LayerWord], columns: tuple[int, int], height: int) -> bool:
    """Whether the ink columns of a part (`inked`: [W] bool, the band's) at `columns` are all under its words,
    each word has ink under it, and each word lies inside the part (a word its edge cuts, as where two lines
    overlap in one band, would answer for ink the part's image does not show)."""
    covered = np.zeros_like(inked)
    for word in words:
        slack = WORD_SLACK * (word.bottom - word.top)
        if word.left < columns[0] - slack or word.right > columns[1] + slack:
            return False
        left, right = max(0, int(word.left - slack)), min(inked.size, int(np.ceil(word.right + slack)))
        span = inked[int(word.left) : max(int(word.left) + 1, int(np.ceil(word.right)))]
        if span.size == 0 or span.mean() < WORD_INKED:
            return False
        covered[left:right] = True
    left, right = columns
    unexplained = int((inked[left:right] & ~covered[left:right]).sum())
    return unexplained <= UNEXPLAINED_INK * height


def _band_of(word: LayerWord, rows: list[tuple[int, int]], spans: list[tuple[int, int]]) -> int | None:
    """The band, of those at `rows` spanning `spans`, whose columns hold `word`'s middle and that starts last
    at or above its middle row (it may still end above it); None if none."""
    bands = [index for index, ((top, _), (left, right)) in enumerate(zip(rows, spans))
             if top <= word.middle_row and left <= word.middle_column < right]
    return max(bands, key=lambda index: rows[index][0], default=None)


def cut_page(image: Image.Image, words: list[LayerWord], split: RegionSplit, sharp: Image.Image | None = None) -> CutPage:
    """`image` (a rendered page; `sharp`, a larger rendering of it, gives the parts' pixels) cut as
    `regions.page_regions` cuts it, without deskew, with the parts whose text its `words` give exactly."""
    bands = page_bands(image, split)
    page, rows, heights = bands.image, bands.rows, bands.heights
    dark = ink_mask(page)  # [H, W]
    band_of = [_band_of(word, rows, bands.spans) for word in words]
    parts = []
    for index, ((top, bottom), (columns_list, is_table_row)) in enumerate(zip(rows, bands.parts)):
        # A word whose middle lies between bands belongs to none: the band holding its ink then has ink no word
        # explains, and is not kept.
        mine = [word for word, band in zip(words, band_of) if band == index and word.middle_row < bottom + 1]
        if not mine:
            continue
        inked = dark[top:bottom].any(axis=0)  # [W]
        for columns in columns_list:
            if columns is None:
                continue
            inside = [word for word in mine if columns[0] <= word.middle_column < columns[1]]
            if inside and _explained(inked, inside, columns, heights[index]):
                text = words_text(inside)
                parts.append(Part(top, bottom, columns, cell_text(text) if is_table_row else text))
    source, zoom, scale = part_source(bands, image, sharp)
    return CutPage(source, tuple(parts), scale, len(rows), zoom)


def render_and_cut(pdf: Path, number: int, budget: PixelBudget, split: RegionSplit) -> CutPage:
    """Page `number` (1-based) of `pdf` rendered as `ocr-read` renders it and cut (`cut_page`)."""
    (image,) = render_pdf_pages(open_document(pdf), [number], DEFAULT_DPI, page_budget(budget, split))
    page = fitted_page(image, budget)
    with pymupdf.open(pdf) as document:
        words = layer_words(document[number - 1], page.size)
    return cut_page(page, words, split, None if page is image else image)


@lru_cache(maxsize=PAGES_CACHED)
def _cached_cut(pdf: Path, number: int, budget: PixelBudget, split: RegionSplit) -> CutPage:
    return render_and_cut(pdf, number, budget, split)


def _damaged(rng: random.Random, cut: CutPage, split: RegionSplit, degradation: str) -> tuple[Image.Image, str]:
    """One of the page's parts, drawn by `rng`, as the reader gets it (enlarged, padded, with the `degradation`'s
    damage), and its text."""
    part = rng.choice(cut.parts)
    return damaged_part(cut.image, part.top, part.bottom, part.columns, split, cut.scale, degradation, rng, cut.zoom), part.text


def part_sample(
    rng: random.Random, pages: list[tuple[Path, int]], budget: PixelBudget, split: RegionSplit, degradation: str
) -> tuple[Image.Image, str]:
    """A part of one of `pages` ((pdf, 1-based page) pairs) drawn by `rng` (`_damaged`); a page without kept parts
    gives way to another."""
    while True:
        pdf, number = rng.choice(pages)
        cut = _cached_cut(pdf, number, budget, split)
        if cut.parts:
            return _damaged(rng, cut, split, degradation)


@lru_cache(maxsize=4)
def _story_cuts(key: int, budget: PixelBudget, split: RegionSplit) -> tuple[CutPage, ...]:
    """The pages of the `synth.story` document drawn from `key`, rendered and cut."""
    with tempfile.NamedTemporaryFile(suffix=".pdf") as pdf:
        pdf.write(story.document(random.Random(key)))
        pdf.flush()
        with pymupdf.open(pdf.name) as document:
            pages = document.page_count
        return tuple(render_and_cut(Path(pdf.name), number, budget, split) for number in range(1, pages + 1))


def layout_sample(
    rng: random.Random, key: int, budget: PixelBudget, split: RegionSplit, degradation: str
) -> tuple[Image.Image, str]:
    """A part of a page of the HTML document drawn from `key` (`synth.story`; samples sharing a key share its
    rendering), drawn by `rng` (`_damaged`); a document without kept parts gives way to the next key's."""
    while True:
        cuts = [cut for cut in _story_cuts(key, budget, split) if cut.parts]
        if cuts:
            return _damaged(rng, rng.choice(cuts), split, degradation)
        key += 1
