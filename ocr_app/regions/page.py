"""A page cut into what the model reads: deskewed, rules erased, bands, each band's cells or chunks."""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image

from ocr_app.config import RegionSplit
from ocr_app.regions.bands import cut_band, enlargement, own_ink, rows_of_bands
from ocr_app.regions.chunks import line_chunks
from ocr_app.regions.deskew import deskewed
from ocr_app.regions.ink import ink_per_row, inked_columns, line_heights, paper_color
from ocr_app.regions.rules import erase_rules
from ocr_app.regions.tables import table_cells


@dataclass(frozen=True)
class Band:
    """A band as the model reads it: a table's row, its cells' images (None: an empty cell, not read), or a
    line, one image or, when long, its chunks', read left to right."""

    images: list[Image.Image | None]
    is_table_row: bool = False


def band_parts(
    image: Image.Image, rows: list[tuple[int, int]], heights: list[int], split: RegionSplit
) -> list[tuple[list[tuple[int, int] | None], bool]]:
    """The columns of the parts each band at `rows` (lines `heights` high) is read in, and whether it is a
    table's row: a table's row cut into its cells (`table_cells`; None for an empty one), a line whole or in
    chunks (`line_chunks`)."""
    if not split.crop_columns:
        return [([(0, image.width)], False) for _ in rows]
    inked = [inked_columns(image, top, bottom) for top, bottom in rows]  # each [W] bool
    return [
        (cells, True) if len(cells) > 1 else (line_chunks(ink, cells[0], height, split), False)
        for ink, height, cells in zip(inked, heights, table_cells(inked, heights, split))
    ]


@dataclass(frozen=True)
class PageBands:
    """A page cut into bands, before any band is cut out: `image` with its rules erased (and, with
    `split.own_ink`, each band's neighbours' ink painted over), the bands' `rows`, their lines' `heights`, each
    band's `parts` (`band_parts`) and the enlargement all its bands get (`enlargement`)."""

    image: Image.Image
    rows: list[tuple[int, int]]
    heights: list[int]
    parts: list[tuple[list[tuple[int, int] | None], bool]]
    scale: float


def page_bands(image: Image.Image, split: RegionSplit) -> PageBands:
    """`image` (upright) cut into bands as every reader of pages cuts it: rules erased (`erase_rules`), rows of
    ink grouped into bands (`rows_of_bands`), with `split.own_ink` each band keeping only its own lines' ink
    (`own_ink`), each band's parts (`band_parts`).  Reading (`page_regions`) and the training data drawn
    (`synth.bands`) or taken from real pages (`train_ocr.textlayer`) all cut here, so that the model is trained
    on the bands it will read."""
    image = erase_rules(image)
    ink = ink_per_row(image)
    rows = rows_of_bands(ink, image.width, split)
    if not rows:
        return PageBands(image, [], [], [], 1.0)
    heights = line_heights(ink, rows)
    if split.own_ink:
        image = own_ink(image, rows, heights)
    return PageBands(image, rows, heights, band_parts(image, rows, heights, split), enlargement(heights, split.text_height))


def page_regions(image: Image.Image, split: RegionSplit, token_side: int) -> list[Band]:
    """The page's bands (`Band`), each part (`page_bands`) cut by `cut_band`: with at least `split.margin` rows
    of paper above and below its ink, as the blocks the model was trained on have.  A page without ink is one
    band: the whole page, so the model still sees it.  Bands are a whole number of visual tokens
    (`token_side`, the pixel budget's factor) high, so the processor does not resize them (a 46-row band of
    one line would be squeezed to 32 rows, its letters to 70% of their height).  A skewed page is turned
    upright first, with `split.deskew` (`deskewed`)."""
    bands = page_bands(deskewed(image) if split.deskew else image, split)
    if not bands.rows:
        return [Band([bands.image])]
    paper = paper_color(bands.image)
    return [
        Band(
            [
                None if columns is None else cut_band(bands.image, top, bottom, columns, split, bands.scale, token_side, paper)
                for columns in parts
            ],
            is_table_row,
        )
        for (top, bottom), (parts, is_table_row) in zip(bands.rows, bands.parts)
    ]


def split_page(image: Image.Image, split: RegionSplit, token_side: int) -> list[Image.Image]:
    """Every image the model reads of the page (`page_regions`), bands in order, a band's cells or chunks left
    to right."""
    return [part for band in page_regions(image, split, token_side) for part in band.images if part is not None]
