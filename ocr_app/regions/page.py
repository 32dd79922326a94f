"""A page cut into what the model reads: deskewed, rules erased, bands, each band's cells or chunks."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image

from ocr_app.config import PixelBudget, RegionSplit
from ocr_app.pages import fit_image
from ocr_app.regions.bands import block_bands, cut_band, enlargement, faint_edges, own_ink
from ocr_app.regions.chunks import line_chunks
from ocr_app.regions.deskew import level_angle, turned
from ocr_app.regions.graphics import graphic_mask
from ocr_app.regions.ink import ink_mask, inked_columns, line_height, painted_over, paper_color
from ocr_app.regions.rules import RULE_CONTRAST, erase_rules, in_long_runs, letter_ink, rule_masks, walls
from ocr_app.regions.tables import table_cells, walled_cells


# A rule erased on the fitted page is erased on the sharper page where its ink there runs this many pixels
# along a row or down a column: on the fitted page a rule took a row of pixels either side with it, and the
# feet of letters standing on an underline went too.
SHARP_RULE_RUN = 48


@dataclass(frozen=True)
class Band:
    """A band as the model reads it: a table's row, its cells' images (None: an empty cell, not read), or a
    line, one image or, when long, its chunks', read left to right."""

    images: list[Image.Image | None]
    is_table_row: bool = False


def band_parts(
    image: Image.Image,
    rows: list[tuple[int, int]],
    heights: list[int],
    spans: list[tuple[int, int]],
    down: np.ndarray,
    split: RegionSplit,
) -> list[tuple[list[tuple[int, int] | None], bool]]:
    """The columns of the parts each band at `rows` and in columns `spans` (lines `heights` high) is read in,
    and whether it is a table's row: a table's row cut into its cells (None for an empty one) at the vertical
    rules crossing it (`down`: [H, W] bool, the page's erased vertical rules; with `split.rule_cells`,
    `walled_cells`) or where its columns are set apart by space (`table_cells`), a line whole or in chunks
    (`line_chunks`)."""
    if not split.crop_columns:
        return [([span], False) for span in spans]
    # each [W] bool, blank outside the band's span
    inked = [_within(inked_columns(image, top, bottom), span) for (top, bottom), span in zip(rows, spans)]
    parts = []
    for ink, (top, bottom), height, cells in zip(inked, rows, heights, table_cells(inked, heights, split)):
        ruled = walled_cells(ink, walls(down, top, bottom), split.margin) if split.rule_cells else None
        if ruled or len(cells) > 1:
            parts.append((ruled or cells, True))
        else:
            parts.append((line_chunks(ink, cells[0], height, split), False))
    return parts


def _within(inked: np.ndarray, span: tuple[int, int]) -> np.ndarray:
    """`inked` ([W] bool) with the columns outside `span` (left, right) blank."""
    kept = np.zeros_like(inked)
    kept[span[0] : span[1]] = inked[span[0] : span[1]]
    return kept


@dataclass(frozen=True)
class PageBands:
    """A page cut into bands, before any band is cut out: `image` with its rules erased (and, with
    `split.own_ink`, each band's neighbours' ink painted over), the bands' `rows` and the columns they span
    (`spans`: the page's width, or a column block's), their lines' `heights`, each
    band's `parts` (`band_parts`), the enlargement all its bands get (`enlargement`), and the page with only its
    rules erased (`ruled`: what `own_ink` painted over is where `image` differs from it)."""

    image: Image.Image
    rows: list[tuple[int, int]]
    spans: list[tuple[int, int]]
    heights: list[int]
    parts: list[tuple[list[tuple[int, int] | None], bool]]
    scale: float
    ruled: Image.Image


def page_bands(image: Image.Image, split: RegionSplit) -> PageBands:
    """`image` (upright) cut into bands as every reader of pages cuts it: rules erased (`rule_masks`,
    `erase_rules`), with `split.graphic_size` graphics too (`graphic_mask`, painted over), rows of ink
    grouped into bands (`block_bands`), with `split.faint_edges` reaching over the faint rows beside them
    (`faint_edges`), with `split.own_ink` each band keeping only its own lines' ink (`own_ink`), each band's
    parts (`band_parts`).  Reading (`page_regions`) and the training
    data drawn (`synth.bands`) or taken from real pages (`train_ocr.textlayer`) all cut here, so that the model
    is trained on the bands it will read."""
    across, down = rule_masks(image)
    letters = letter_ink(image, down) if split.faint_edges else None  # [H, W], before the rules' edges go
    image = ruled = erase_rules(image, across | down)
    dark = ink_mask(image)  # [H, W]
    if split.graphic_size is not None:
        graphics = graphic_mask(dark, split.graphic_size)  # [H, W]
        if graphics.any():
            image = painted_over(image, graphics)
            dark = ink_mask(image)
            if letters is not None:
                letters &= ~graphics
    bands = block_bands(dark, split)
    if not bands:
        return PageBands(image, [], [], [], [], 1.0, ruled)
    rows, spans = [band for band, _ in bands], [span for _, span in bands]
    heights = [line_height(dark[top:bottom, left:right].sum(axis=1)) for (top, bottom), (left, right) in bands]
    if letters is not None:
        rows = faint_edges(letters, rows, spans, heights)
    if split.own_ink:
        image = own_ink(image, rows, heights, spans)
    parts = band_parts(image, rows, heights, spans, down, split)
    return PageBands(image, rows, spans, heights, parts, enlargement(heights, split.text_height), ruled)


def _changed(before: Image.Image, after: Image.Image) -> np.ndarray:
    """[h, w] bool: the pixels that differ between two images of the same size."""
    return (np.asarray(before.convert("RGB")) != np.asarray(after.convert("RGB"))).any(axis=2)


def painted_as(sharp: Image.Image, page: Image.Image, bands: PageBands) -> Image.Image:
    """`sharp`, a larger rendering of `page`, painted with paper where `page_bands` painted `page` into `bands`:
    its bands' neighbours' ink, and its rules where `sharp`'s ink runs SHARP_RULE_RUN pixels along them; each
    with a pixel of `sharp` around (a stroke's anti-aliased edge)."""
    rules, foreign = _changed(page, bands.ruled), _changed(bands.ruled, bands.image)  # each [h, w]
    if not (rules.any() or foreign.any()):
        return sharp

    def enlarged(mask: np.ndarray) -> np.ndarray:
        return cv2.resize(mask.astype(np.uint8), sharp.size, interpolation=cv2.INTER_NEAREST).astype(bool)  # [H, W]

    mask = enlarged(foreign)  # [H, W]
    if rules.any():
        dark = ink_mask(sharp, RULE_CONTRAST)  # [H, W]
        mask |= enlarged(rules) & (in_long_runs(dark, SHARP_RULE_RUN) | in_long_runs(dark.T, SHARP_RULE_RUN).T)
    mask = cv2.dilate(mask.astype(np.uint8), np.ones((3, 3), np.uint8))  # [H, W] 0 or 1
    painted = sharp.convert("RGB")  # a copy
    painted.paste(paper_color(bands.image), mask=Image.fromarray(mask * 255))
    return painted


def fitted_page(image: Image.Image, budget: PixelBudget) -> Image.Image:
    """The page the cut is made on: `image` itself when `budget` holds it, else `image` fitted to `budget`."""
    return image if image.width * image.height <= budget.max_pixels else fit_image(image, budget)


def part_source(bands: PageBands, page: Image.Image, sharp: Image.Image | None) -> tuple[Image.Image, tuple[float, float], float]:
    """What the parts of `page` cut into `bands` are taken from, its zoom (across, down) over `page`, and their
    enlargement: `bands.image` at `bands.scale`; with `sharp`, a larger rendering of `page`, that rendering
    painted as `bands.image` was (`painted_as`), enlarged at least to its own size (never shrunk below it)."""
    if sharp is None:
        return bands.image, (1.0, 1.0), bands.scale
    zoom = (sharp.width / page.width, sharp.height / page.height)
    return painted_as(sharp, page, bands), zoom, max(bands.scale, min(zoom))


def page_regions(image: Image.Image, split: RegionSplit, budget: PixelBudget) -> list[Band]:
    """The page's bands (`Band`), each part (`page_bands`) cut by `cut_band`: with at least `split.margin` rows
    of paper above and below its ink, as the blocks the model was trained on have.  A page without ink is one
    band: the whole page, so the model still sees it.  Bands are a whole number of visual tokens
    (`budget.factor`) high, so the processor does not resize them (a 46-row band of one line would be
    squeezed to 32 rows, its letters to 70% of their height).  A skewed page is turned upright first, with
    `split.deskew` (`level_angle`).

    The cut is made on the page fitted to `budget`, which every key of `split` is measured in; an `image`
    larger than that (rendered with `split.page_pixels`) gives the parts' pixels, its small type enlarged from
    its own strokes rather than from a downscaled page's blur."""
    page = fitted_page(image, budget)
    angle = level_angle(page) if split.deskew else 0.0
    sharp = None if page is image else turned(image, angle)
    page = turned(page, angle)
    bands = page_bands(page, split)
    if not bands.rows:
        return [Band([bands.image])]
    paper = paper_color(bands.image)
    source, zoom, scale = part_source(bands, page, sharp)
    return [
        Band(
            [
                None if columns is None
                else cut_band(source, top, bottom, columns, split, scale, budget.factor, paper, zoom)
                for columns in parts
            ],
            is_table_row,
        )
        for (top, bottom), (parts, is_table_row) in zip(bands.rows, bands.parts)
    ]


def split_page(image: Image.Image, split: RegionSplit, budget: PixelBudget) -> list[Image.Image]:
    """Every image the model reads of the page (`page_regions`), bands in order, a band's cells or chunks left
    to right."""
    return [part for band in page_regions(image, split, budget) for part in band.images if part is not None]
