"""Bands: a page's rows cut into bands of whole text lines (a row-only X-Y cut), enlarged and padded as the model reads them."""

from __future__ import annotations

import cv2
import numpy as np
from PIL import Image, ImageOps

from ocr_app.config import RegionSplit
from ocr_app.regions.ink import INK_SHARE, LIGHT_SHARE, ink_mask, ink_per_row, inner_runs, line_heights, paper_color

# A line's body holds at least this share: a cut between two lines has one's body on either side (the light
# rows between a descender's stem and its heavier tail, at the foot of a line, are not between lines).
BODY_SHARE = 0.25
# Past this, enlarging only blurs: a line 10 rows high holds no more detail at 40.
MAX_ENLARGEMENT = 3.0
# A band this many times the page's median line height high holds two lines or more that `max_height` let
# through together (small type: 9-pt lines are 9-12 rows apart on a 1.1-MP A4 page): it is cut between them.
# One line's ink, accents and tails included, is under 1.6 of its letters' height.
LINES_APART = 1.7
# A band still this many times the page's median line height high after `lines_apart` (ink beside its lines
# fills the rows between them: a logo or a QR code by an address block, a form's tall label by its lines) is
# cut into blocks at blank columns this many line heights wide, each block cut into bands of its own.
BLOCK_GAP = 2.0
# A stroke of ink from a neighbouring band is erased from a band when fewer of its rows than this share of the
# band's line height lie in the band: a descender's tail or an accent, not a letter two touching lines share.
FOREIGN_SHARE = 0.5
# A band reaches at most this share of its line's height over the faint rows beside its ink (`faint_edges`): a
# descender's tail or an accent over a capital is under a third of it.
FAINT_REACH = 0.4


def valley_row(ink: np.ndarray) -> int | None:
    """In a band's rows (`ink`: [h] ink pixels per row), the middle of the widest run of light rows with ink
    on both sides and letters' bodies beyond: the space between two lines, descenders above and ascenders
    below.  The widest, not the lightest row: a line's accents can part from its letters by a row lighter
    than the space above them.  None if there is no such run (one line, or lines skewed into each other)."""
    body = ink >= BODY_SHARE * ink.max()  # [h]
    runs = [(start, end) for start, end in inner_runs(ink >= LIGHT_SHARE * ink.max()) if body[:start].any() and body[end:].any()]
    if not runs:
        return None
    middle = ink.size / 2
    start, end = max(runs, key=lambda run: (run[1] - run[0], -abs((run[0] + run[1]) / 2 - middle)))
    return (start + end) // 2


def band_cuts(ink: np.ndarray, inked: np.ndarray, top: int, bottom: int, split: RegionSplit) -> list[int]:
    """Rows at which to cut rows top..bottom-1 of a page (`ink`: [H] ink pixels per row, `inked`: [H] rows
    with ink) so that each band's ink is at most `split.max_height` high where blank runs allow (and light
    rows, with `split.cut_between_lines`); the widest blank run is cut first, in its middle."""
    band_ink = np.flatnonzero(inked[top:bottom])
    if band_ink.size == 0:
        return []
    top, bottom = top + int(band_ink[0]), top + int(band_ink[-1]) + 1
    if bottom - top <= split.max_height:
        return []
    runs = [(start, end) for start, end in inner_runs(inked[top:bottom]) if end - start >= split.min_gap]
    if runs:
        middle = (bottom - top) / 2
        # Widest first; between equals, the one nearer the middle gives the more even halves.
        start, end = max(runs, key=lambda run: (run[1] - run[0], -abs((run[0] + run[1]) / 2 - middle)))
        cut = top + (start + end) // 2
    else:
        valley = valley_row(ink[top:bottom]) if split.cut_between_lines else None
        if valley is None:
            return []
        cut = top + valley
    return band_cuts(ink, inked, top, cut, split) + [cut] + band_cuts(ink, inked, cut, bottom, split)


def band_rows(image: Image.Image, split: RegionSplit) -> list[tuple[int, int]]:
    """(first, end) rows of each band's ink, top to bottom, end exclusive; none for a page without ink."""
    return rows_of_bands(ink_per_row(image), image.width, split)


def rows_of_bands(ink: np.ndarray, width: int, split: RegionSplit) -> list[tuple[int, int]]:
    """`band_rows` of a page `width` wide from its ink per row ([H])."""
    inked = ink > INK_SHARE * width
    rows = np.flatnonzero(inked)
    if rows.size == 0:
        return []
    edges = [int(rows[0]), *band_cuts(ink, inked, int(rows[0]), int(rows[-1]) + 1, split), int(rows[-1]) + 1]
    return [_ink_span(inked, top, bottom) for top, bottom in zip(edges, edges[1:])]


def _ink_span(inked: np.ndarray, top: int, bottom: int) -> tuple[int, int] | None:
    """(first, end) of the rows holding ink (`inked`: [H] bool) among top..bottom-1; None if none do."""
    band_ink = np.flatnonzero(inked[top:bottom])
    return (top + int(band_ink[0]), top + int(band_ink[-1]) + 1) if band_ink.size else None


def lines_apart(ink: np.ndarray, inked: np.ndarray, rows: list[tuple[int, int]], heights: list[int]) -> list[tuple[int, int]]:
    """`rows` (bands' (first, end) rows of a page with `ink` pixels per row, `inked` rows holding ink; their
    lines `heights` high) with each band over LINES_APART times the median line height cut between its lines
    (`valley_row`), again while a part is that high and has two lines' bodies."""
    limit = LINES_APART * float(np.median(heights))
    parted = []
    pending = list(reversed(rows))
    while pending:
        top, bottom = pending.pop()
        valley = valley_row(ink[top:bottom]) if bottom - top > limit else None
        if valley is None:
            parted.append((top, bottom))
            continue
        cut = top + valley
        pending += [span for span in (_ink_span(inked, cut, bottom), _ink_span(inked, top, cut)) if span]  # top part popped first
    return parted


def column_blocks(inked: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """(left, right) of each block of a band whose inked columns are `inked` ([W] bool): runs of ink parted by
    blank runs at least `gap` wide, each block reaching to the middle of the gaps beside it (and the edges)."""
    edges = [0] + [(start + end) // 2 for start, end in inner_runs(inked) if end - start >= gap] + [inked.size]
    return list(zip(edges, edges[1:]))


def line_bands(dark: np.ndarray, split: RegionSplit) -> list[tuple[int, int]]:
    """(first, end) rows of each band of a page whose ink is `dark` ([H, W] bool): rows of ink grouped into
    bands (`rows_of_bands`), with `split.cut_between_lines` cut between tight lines (`lines_apart`)."""
    ink = dark.sum(axis=1)  # [H]
    rows = rows_of_bands(ink, dark.shape[1], split)
    if rows and split.cut_between_lines:
        rows = lines_apart(ink, ink > INK_SHARE * dark.shape[1], rows, line_heights(ink, rows))
    return rows


def block_bands(dark: np.ndarray, split: RegionSplit) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """((first, end) rows, (left, right) columns) of each band of a page whose ink is `dark` ([H, W] bool), in
    reading order: its `line_bands`, the whole width; with `split.column_blocks`, a band still over LINES_APART
    times the page's median line height is cut into blocks at blank columns BLOCK_GAP line heights wide
    (`column_blocks`) when a block then parts into `line_bands` of its own, and read block by block, each
    block's bands top to bottom."""
    rows = line_bands(dark, split)
    width = dark.shape[1]
    if not rows or not split.column_blocks:
        return [(band, (0, width)) for band in rows]
    median_height = float(np.median(line_heights(dark.sum(axis=1), rows)))
    bands = []
    for top, bottom in rows:
        tall = bottom - top > LINES_APART * median_height
        blocks = column_blocks(dark[top:bottom].any(axis=0), round(BLOCK_GAP * median_height)) if tall else []
        inner = [
            ((top + first, top + end), (left, right))
            for left, right in blocks
            for first, end in line_bands(dark[top:bottom, left:right], split)
        ]
        bands += inner if len(inner) > len(blocks) else [((top, bottom), (0, width))]
    return bands


def own_ink(
    image: Image.Image, rows: list[tuple[int, int]], heights: list[int], spans: list[tuple[int, int]]
) -> Image.Image:
    """`image` (RGB) with the rows of each band at `rows` (lines `heights` high), in its columns `spans`, holding
    only the band's own ink: a connected stroke whose middle row lies outside the band, and of which fewer than
    FOREIGN_SHARE of a line's rows lie in it, is painted over with paper.  Cut between lines set tight, a band's
    top rows hold specks of the line above's descenders and its bottom rows the next line's accents, which the
    model would read as letters."""
    dark = ink_mask(image).astype(np.uint8)  # [H, W]
    _, labels, stats, _ = cv2.connectedComponentsWithStats(dark, connectivity=8)  # labels [H, W], stats [N, 5]
    tops = stats[:, cv2.CC_STAT_TOP]  # [N]
    ends = tops + stats[:, cv2.CC_STAT_HEIGHT]  # [N]
    middles = (tops + ends) / 2  # [N]
    pixels = np.array(image.convert("RGB"))  # [H, W, 3], a copy
    paper = paper_color(image)
    for (top, bottom), height, (left, right) in zip(rows, heights, spans):
        rows_inside = np.minimum(ends, bottom) - np.maximum(tops, top)  # [N]
        foreign = ((middles < top) | (middles >= bottom)) & (rows_inside < FOREIGN_SHARE * height)  # [N]
        foreign[0] = False  # label 0 is the paper
        pixels[top:bottom, left:right][foreign[labels[top:bottom, left:right]]] = paper
    return Image.fromarray(pixels)


def faint_edges(
    letters: np.ndarray, rows: list[tuple[int, int]], spans: list[tuple[int, int]], heights: list[int]
) -> list[tuple[int, int]]:
    """`rows` of the bands of a page whose letters' ink is `letters` ([H, W] bool, `rules.letter_ink`), in columns
    `spans`, lines `heights` high, each reaching over the rows beside it that hold any of it in its columns: at
    most FAINT_REACH of its line's height, and not past the middle of the gap to a band above or below it in the
    same columns.  A band's rows are those of the rules-erased page holding more than INK_SHARE of its width in
    ink: a line's descender tails and its capitals' accents are cut off where erasing a table's rule took them
    with its edge, or where in small type their rows hold a few pixels, and the reader then saw "y" as "v", "ş"
    as "s" and "Ö" as "O" (a row of a ruled table on samples/real-tr, 2 rows above its rule)."""
    reached = []
    for index, ((top, bottom), (left, right), height) in enumerate(zip(rows, spans, heights)):
        reach = max(1, round(FAINT_REACH * height))
        above, below = max(0, top - reach), min(letters.shape[0], bottom + reach)
        for other, ((other_top, other_bottom), (other_left, other_right)) in enumerate(zip(rows, spans)):
            if other == index or other_right <= left or other_left >= right:
                continue
            if other_bottom <= top:
                above = max(above, (other_bottom + top) // 2)
            elif other_top >= bottom:
                below = min(below, (bottom + other_top) // 2)
        inked = letters[above:below, left:right].any(axis=1)  # [below - above]
        while top > above and inked[top - 1 - above]:
            top -= 1
        while bottom < below and inked[bottom - above]:
            bottom += 1
        reached.append((top, bottom))
    return reached


def enlargement(heights: list[int], text_height: int | None) -> float:
    """How much to enlarge a page's bands so that the median of their line heights (`line_height`) is
    `text_height` (never shrunk; the median, as one line's height depends on its letters: "ana" has no
    ascender, "Şığ" both)."""
    if text_height is None:
        return 1.0
    return min(MAX_ENLARGEMENT, max(1.0, text_height / float(np.median(heights))))


def cut_band(
    image: Image.Image,
    top: int,
    bottom: int,
    columns: tuple[int, int],
    split: RegionSplit,
    scale: float,
    token_side: int,
    paper: tuple[int, ...],
    zoom: tuple[float, float] = (1.0, 1.0),
) -> Image.Image:
    """Rows top..bottom-1 and `columns` (left, right exclusive) of the cut page as the model reads them: enlarged
    by `scale`, with `split.margin` rows of `paper` above and below, and padded to a whole number of visual
    tokens (`token_side`) high.  The pixels come from `image`, the cut page or the same page `zoom` (across,
    down) times larger, whose sharper strokes are resized to the same size."""
    left, right = columns
    size = (right - left, bottom - top)
    if scale > 1.0:
        size = (round(size[0] * scale), round(size[1] * scale))
    zoom_x, zoom_y = zoom
    band = image.crop((round(left * zoom_x), round(top * zoom_y), round(right * zoom_x), round(bottom * zoom_y)))
    if band.size != size:
        band = band.resize(size, Image.Resampling.BICUBIC)
    extra = -(band.height + 2 * split.margin) % token_side
    border = (0, split.margin + extra // 2, 0, split.margin + extra - extra // 2)
    return ImageOps.expand(band, border=border, fill=paper)
