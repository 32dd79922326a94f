"""Regions: a page cut into bands of whole text lines, for a model that reads blocks rather than pages.

A small model trained on blocks (a few paragraphs, a table: a few hundred
pixels high) reads a page best one block at a time.  The cuts follow the
classic X-Y cut, on rows only: while a band is taller than `max_height`, it is
cut in the middle of its widest blank run (at least `min_gap` rows without
ink), so blocks part at the space between them before a paragraph parts
between its lines, and no cut ever crosses ink.  A band with no such run stays
whole, however tall, unless `cut_between_lines` is set: then it is cut in its
widest run of rows lighter than its letters' bodies: a paragraph set so tight
that one line's descenders reach the next line's ascenders has no blank row
between its lines, but rows there hold a fraction of the ink of a row through
the letters.  Each band is read as its own image; the page's text is
the bands' texts in reading order, a blank line apart (a table's rows, each
its own band, one line apart, with the delimiter row Markdown needs under the
first).  A band can also be
cut to its ink's columns, and a page of small type enlarged, so that a line
looks like the lines the model was trained on.  The rows of a table whose
columns are set apart by space alone are cut into their cells, each read
alone: read whole, a row's wide gaps break a small model's reading.  A long
line can be read in chunks cut at word gaps, joined by spaces.  A skewed scan is
turned level before it is cut, and a table's rules are erased.

`ReadByRegions` wraps any engine so: `read` reads the bands one after another
(streamed, with the blank line between them), `read_many` puts every band (or
cell) of every page in flight and hands back a page once its last is read.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
from jdeskew.estimator import get_angle
from PIL import Image, ImageOps

from ocr_app.config import RegionSplit
from ocr_app.engines import Engine, GenerationSettings, Key, PageText, TextCallback, WrappedEngine
from ocr_app.metrics import PageMetrics, SpecDecodingStats

SEPARATOR = "\n\n"
# Ink is darker than the paper by this much (of 255); scan noise (sigma <= 14) stays well under it.
INK_CONTRAST = 80
# A row holds ink when more than this share of its pixels do: a few noise specks keep a row blank.
INK_SHARE = 0.002
# Between two lines set tight, rows hold only descenders, ascenders and accents: under this share of the
# ink of the band's busiest row (a row through the letters' bodies crosses every stroke).  Not higher: the
# body of a short line (a signature under a paragraph) holds little ink beside a full line's.
LIGHT_SHARE = 0.1
# A line's body holds at least this share: a cut between two lines has one's body on either side (the light
# rows between a descender's stem and its heavier tail, at the foot of a line, are not between lines).
BODY_SHARE = 0.25
# Words are apart by more than this share of their line's height (see `line_chunks`).
WORD_GAP = 0.25
# A chunk's cut is the widest word gap in the last part of its room, from this share of it on.
CHUNK_CUT_FROM = 0.6
# A rule (a table's border, an underline) is a straight run of ink at least this share of the page's width
# when horizontal, of its height when vertical, and at least this many pixels.  Letters' runs on
# samples/tob-mini's pages are shorter: under 96 across (the feet of a blurred bold serif line) and 48 down.
RULE_SHARE = (1 / 8, 1 / 20)
MIN_RULE = (96, 48)
RULE_THICKNESS = 6
# A rule's pixels are darker than the paper by this much: a thin rule blurred by a scan is lighter than letters.
RULE_CONTRAST = 40
# Skew is sought up to this many degrees either way (scans are turned by a few); a page turned by less than
# MIN_SKEW is left as it is: its lines drift by under 3 px across an 880-px page, and turning blurs a little.
MAX_SKEW = 5.0
MIN_SKEW = 0.2
# jdeskew's estimate is refined over this many degrees either way, in steps of SKEW_STEP (at 0.02, an 880-px
# line's ends are a third of a pixel off level).
SKEW_REFINE = 0.3
SKEW_STEP = 0.02
# Past this, enlarging only blurs: a line 10 rows high holds no more detail at 40.
MAX_ENLARGEMENT = 3.0


def ink_per_row(image: Image.Image) -> np.ndarray:
    """[H] int: how many pixels of each row of `image` are ink."""
    gray = np.asarray(image.convert("L"), dtype=np.int16)  # [H, W]
    paper = int(np.median(gray))
    return (gray < paper - INK_CONTRAST).sum(axis=1)


def in_long_runs(ink: np.ndarray, length: int) -> np.ndarray:
    """[H, W] bool: the pixels of `ink` ([H, W] bool) in a run of at least `length` inked pixels along a row."""
    width = ink.shape[1]
    inked = np.cumsum(np.pad(ink, ((0, 0), (1, 0))), axis=1, dtype=np.int32)  # [H, W+1]: ink left of each column
    full = np.pad(inked[:, length:] - inked[:, :-length] == length, ((0, 0), (0, length - 1)))  # [H, W]: run starts
    starts = np.cumsum(np.pad(full, ((0, 0), (length, 0))), axis=1, dtype=np.int32)  # [H, W+length]
    return starts[:, length:] - starts[:, :width] > 0  # a full run starts within `length` columns left of it


def _thickened(mask: np.ndarray, axis: int) -> np.ndarray:
    """`mask` ([H, W] bool) with each set pixel's neighbours along `axis` set too."""
    padded = np.pad(mask, [(1, 1) if side == axis else (0, 0) for side in range(2)])
    size = mask.shape[axis]
    return np.take(padded, range(0, size), axis=axis) | mask | np.take(padded, range(2, size + 2), axis=axis)


def erase_rules(image: Image.Image) -> Image.Image:
    """`image` with its rules (`RULE_SHARE`) painted over in the paper's colour, a pixel around them too (their
    anti-aliased edges): a table's borders join its rows into one band and its columns into one cell, and
    the model reads text, not lines."""
    pixels = np.asarray(image.convert("RGB"))  # [H, W, 3]
    gray = np.asarray(image.convert("L"), dtype=np.int16)  # [H, W]
    ink = gray < int(np.median(gray)) - RULE_CONTRAST
    height, width = ink.shape
    across, down = (max(least, round(share * side)) for least, share, side in zip(MIN_RULE, RULE_SHARE, (width, height)))
    # A rule skewed by a degree steps aside a pixel every 57: runs are sought in ink thickened by a pixel across.
    # A rule is thin: ink thicker than RULE_THICKNESS across it (a picture, a shaded cell, a letter's stem
    # where it touches the rule) is not a rule.
    rules = np.zeros_like(ink)
    if width >= across:
        rules |= in_long_runs(_thickened(ink, axis=0), across) & ~in_long_runs(ink.T, RULE_THICKNESS + 1).T
    if height >= down:
        rules |= in_long_runs(_thickened(ink, axis=1).T, down).T & ~in_long_runs(ink, RULE_THICKNESS + 1)
    if not rules.any():
        return image
    rules = _thickened(_thickened(rules, axis=0), axis=1)
    erased = pixels.copy()
    erased[rules] = paper_color(image)
    return Image.fromarray(erased)


def skew_angle(image: Image.Image) -> float:
    """Degrees to turn `image` by (counter-clockwise) to level its lines: jdeskew's estimate (a radial
    projection of the page's spectrum, whose strongest direction is the lines'; off by up to 0.2 degrees
    on samples/tob-mini's pages), refined to the angle within `SKEW_REFINE` of it at which the ink's rows
    are sharpest (the variance of ink per row peaks when every line fills its own rows)."""
    gray = np.asarray(image.convert("L"))  # [H, W] uint8
    inked = gray < int(np.median(gray)) - INK_CONTRAST  # [H, W]
    if not inked.any():
        return 0.0
    coarse = get_angle(gray, angle_max=MAX_SKEW)
    ink = Image.fromarray(inked.astype(np.uint8) * 255)

    def row_sharpness(angle: float) -> float:
        turned = np.asarray(ink.rotate(angle, resample=Image.Resampling.BILINEAR), dtype=np.float32)  # [H, W]
        return float(np.var(turned.sum(axis=1)))

    return max(coarse + np.arange(-SKEW_REFINE, SKEW_REFINE + SKEW_STEP / 2, SKEW_STEP), key=row_sharpness)


def deskewed(image: Image.Image) -> Image.Image:
    """`image` turned so that its lines run level (`skew_angle`) when they are skewed by MIN_SKEW to MAX_SKEW
    degrees, grown to keep its corners, the new ones in the paper's colour."""
    angle = skew_angle(image)
    if not MIN_SKEW <= abs(angle) <= MAX_SKEW:
        return image
    return image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=paper_color(image))


def ink_rows(image: Image.Image) -> np.ndarray:
    """[H] bool: the rows of `image` that hold ink."""
    return ink_per_row(image) > INK_SHARE * image.width


def inked_columns(image: Image.Image, top: int, bottom: int) -> np.ndarray:
    """[W] bool: the columns of `image` with ink in rows top..bottom-1."""
    gray = np.asarray(image.crop((0, top, image.width, bottom)).convert("L"), dtype=np.int16)  # [h, W]
    return (gray < int(np.median(gray)) - INK_CONTRAST).any(axis=0)


def cell_columns(inked: np.ndarray, gap: int, margin: int) -> list[tuple[int, int]]:
    """(left, right) columns, right exclusive, of each cell of a band whose inked columns are `inked` ([W]
    bool): runs of ink parted by blank runs at least `gap` columns wide, each widened by `margin` on either
    side but not past the middle of a gap (nor the band's edges).  One cell, the whole width, without ink."""
    ink = np.flatnonzero(inked)
    if ink.size == 0:
        return [(0, inked.size)]
    gaps = [(start, end) for start, end in inner_runs(inked) if end - start >= gap]
    starts, ends = [int(ink[0])] + [end for _, end in gaps], [start for start, _ in gaps] + [int(ink[-1]) + 1]
    middles = [(start + end) // 2 for start, end in gaps]
    return [
        (max(low, start - margin), min(high, end + margin))
        for start, end, low, high in zip(starts, ends, [0] + middles, middles + [inked.size])
    ]


def blank_runs(inked: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each run of blank rows in `inked` ([H] bool), end exclusive."""
    blank = np.concatenate(([False], ~inked, [False]))
    changes = np.flatnonzero(blank[1:] != blank[:-1])  # starts and ends alternate
    return [(int(start), int(end)) for start, end in zip(changes[::2], changes[1::2])]


def inner_runs(inked: np.ndarray) -> list[tuple[int, int]]:
    """The blank runs of `inked` ([h] bool) with ink above and below them."""
    return [(start, end) for start, end in blank_runs(inked) if start > 0 and end < inked.size]


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
    bands = []
    for top, bottom in zip(edges, edges[1:]):
        band_ink = np.flatnonzero(inked[top:bottom])
        bands.append((top + int(band_ink[0]), top + int(band_ink[-1]) + 1))
    return bands


def line_height(ink: np.ndarray) -> int:
    """The height of a band's text line (`ink`: [h] ink pixels per row of the band): its longest run of rows
    holding at least a tenth of the ink of its busiest row.  Not the band's ink height: a table row's band
    also holds its cell borders' rules, and a line's accents and descender tails hold little ink."""
    return max(end - start for start, end in blank_runs(ink < LIGHT_SHARE * ink.max()))


def enlargement(heights: list[int], text_height: int | None) -> float:
    """How much to enlarge a page's bands so that the median of their line heights (`line_height`) is
    `text_height` (never shrunk; the median, as one line's height depends on its letters: "ana" has no
    ascender, "Şığ" both)."""
    if text_height is None:
        return 1.0
    return min(MAX_ENLARGEMENT, max(1.0, text_height / float(np.median(heights))))


def line_heights(ink: np.ndarray, rows: list[tuple[int, int]]) -> list[int]:
    """`line_height` of each band at `rows` of a page with `ink` pixels per row ([H])."""
    return [line_height(ink[top:bottom]) for top, bottom in rows]


def paper_color(image: Image.Image) -> tuple[int, ...]:
    return tuple(int(v) for v in np.median(np.asarray(image.convert("RGB")).reshape(-1, 3), axis=0))


def table_cells(inked: list[np.ndarray], heights: list[int], split: RegionSplit) -> list[list[tuple[int, int] | None]]:
    """(left, right) columns of each cell of each band whose inked columns are `inked` (each [W] bool) and line
    `heights` high, None for a cell without ink.  A band is one cell, its ink's columns plus `split.margin`,
    unless it is one of two or more bands in a row whose ink parts at blank columns
    `split.cell_gap` times their line's height wide (words are a third of it apart): a table's rows, with
    its columns set apart by space alone.  Those bands are all cut where every one of them is blank, so
    that each row has the table's columns, even a row with an empty cell."""
    cells: list[list[tuple[int, int] | None]] = [cell_columns(ink, ink.size, split.margin) for ink in inked]
    if split.cell_gap is None:
        return cells
    gaps = [max(1, round(split.cell_gap * height)) for height in heights]
    parted = np.array([len(cell_columns(ink, gap, split.margin)) > 1 for ink, gap in zip(inked, gaps)])
    for start, end in blank_runs(~parted):  # runs of parted bands
        if end - start < 2:
            continue
        table = cell_columns(np.any(inked[start:end], axis=0), int(np.median(gaps[start:end])), split.margin)
        for band in range(start, end):
            cells[band] = [columns if inked[band][columns[0] : columns[1]].any() else None for columns in table]
    return cells


def cut_band(
    image: Image.Image,
    top: int,
    bottom: int,
    columns: tuple[int, int],
    split: RegionSplit,
    scale: float,
    token_side: int,
    paper: tuple[int, ...],
) -> Image.Image:
    """Rows top..bottom-1 and `columns` (left, right exclusive) of `image` as the model reads them: enlarged by
    `scale`, with `split.margin` rows of `paper` above and below, and padded to a whole number of visual tokens
    (`token_side`) high."""
    left, right = columns
    band = image.crop((left, top, right, bottom))
    if scale > 1.0:
        band = band.resize((round(band.width * scale), round(band.height * scale)), Image.Resampling.BICUBIC)
    extra = -(band.height + 2 * split.margin) % token_side
    border = (0, split.margin + extra // 2, 0, split.margin + extra - extra // 2)
    return ImageOps.expand(band, border=border, fill=paper)


@dataclass(frozen=True)
class Band:
    """A band as the model reads it: a table's row, its cells' images (None: an empty cell, not read), or a
    line, one image or, when long, its chunks', read left to right."""

    images: list[Image.Image | None]
    is_table_row: bool = False


def line_chunks(inked: np.ndarray, columns: tuple[int, int], height: int, split: RegionSplit) -> list[tuple[int, int]]:
    """`columns` (left, right exclusive) of a line `height` rows high whose inked columns are `inked` ([W]
    bool), cut at word gaps into chunks at most `split.chunk_width` heights wide: each cut in the middle of
    the widest word gap from `CHUNK_CUT_FROM` of the chunk's room to its end, else of the last one within
    it, else of the first past it (a word wider than the room).
    A word gap is a blank run at least `WORD_GAP` of the line's height and half its widest blank run wide:
    words are 0.43 heights apart and more, letters up to 0.29 apart in proportional type but 0.43 in
    monospaced type, whose words are 0.86 apart."""
    if split.chunk_width is None:
        return [columns]
    room = split.chunk_width * height
    left, right = columns
    runs = inner_runs(inked[left:right])
    widest = max((end - start for start, end in runs), default=0)
    cuts = {
        left + (start + end) // 2: end - start for start, end in runs if end - start >= max(WORD_GAP * height, widest / 2)
    }  # the cut each word gap offers: its width
    chunks = []
    while right - left > room:
        within = [cut for cut in cuts if left < cut <= left + room]
        window = [cut for cut in within if cut >= left + CHUNK_CUT_FROM * room]
        beyond = [cut for cut in cuts if cut > left + room]
        if window:
            cut = max(window, key=cuts.__getitem__)
        elif within or beyond:
            cut = max(within) if within else min(beyond)
        else:
            break
        chunks.append((left, cut))
        left = cut
    return chunks + [(left, right)]


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


def page_regions(image: Image.Image, split: RegionSplit, token_side: int) -> list[Band]:
    """The page's bands (`Band`), each part (`band_parts`) cut by `cut_band`: with at least `split.margin` rows
    of paper above and below its ink, as the blocks the model was trained on have.  A page without ink is one
    band: the whole page, so the model still sees it.  Bands are a whole number of visual tokens
    (`token_side`, the pixel budget's factor) high, so the processor does not resize them (a 46-row band of
    one line would be squeezed to 32 rows, its letters to 70% of their height).  A skewed page is turned
    upright first, with `split.deskew` (`deskewed`), and its rules are erased (`erase_rules`)."""
    image = erase_rules(deskewed(image) if split.deskew else image)
    ink = ink_per_row(image)
    rows = rows_of_bands(ink, image.width, split)
    if not rows:
        return [Band([image])]
    heights = line_heights(ink, rows)
    scale = enlargement(heights, split.text_height)
    paper = paper_color(image)
    return [
        Band(
            [None if columns is None else cut_band(image, top, bottom, columns, split, scale, token_side, paper) for columns in parts],
            is_table_row,
        )
        for (top, bottom), (parts, is_table_row) in zip(rows, band_parts(image, rows, heights, split))
    ]


def split_page(image: Image.Image, split: RegionSplit, token_side: int) -> list[Image.Image]:
    """Every image the model reads of the page (`page_regions`), bands in order, a band's cells or chunks left
    to right."""
    return [part for band in page_regions(image, split, token_side) for part in band.images if part is not None]


def is_table_row(text: str) -> bool:
    """Whether a band's text is a table's row (or rows): `| a | b |` on each line."""
    lines = text.strip().splitlines()
    return bool(lines) and all(line.startswith("|") and line.rstrip().endswith("|") for line in lines)


def band_separator(previous: list[str], upcoming: str) -> str:
    """What goes between the texts of the bands read so far and the next band's, which starts with `upcoming`:
    a blank line, or a line break between two rows of one table, so that its rows stay one Markdown table;
    under a table's first row (its header) also the delimiter row Markdown needs and no band shows."""
    if not previous or not is_table_row(previous[-1]) or not upcoming.startswith("|"):
        return SEPARATOR
    if len(previous) > 1 and is_table_row(previous[-2]):
        return "\n"
    cells = previous[-1].strip().splitlines()[0].count("|") - 1
    return "\n|" + " --- |" * cells + "\n"


def joined_text(texts: list[str]) -> str:
    """The page's text from its bands' texts, in order (see `band_separator`)."""
    return "".join((band_separator(texts[:index], text) if index else "") + text for index, text in enumerate(texts))


def table_row(cells: tuple[str, ...] | list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def cell_text(text: str) -> str:
    """A cell's reading as a table's cell is written: one line, no pipes, no emphasis (cells are plain, as
    in the benchmark's tables, though a header's may be set in bold)."""
    return " ".join(text.replace("**", "").replace("|", " ").split())


def merged(readings: list[PageText], text: str, wall_s: float) -> PageText:
    """One reading of the `readings` of a page's parts, in order, whose joined text is `text`."""
    specs = [reading.metrics.spec for reading in readings if reading.metrics.spec is not None]
    spec = None
    if specs:
        spec = SpecDecodingStats()
        for reading_spec in specs:
            spec.merge(reading_spec)
    metrics = PageMetrics(
        prompt_tokens=sum(reading.metrics.prompt_tokens for reading in readings),
        output_tokens=sum(reading.metrics.output_tokens for reading in readings),
        wall_s=wall_s,
        finish_reason="length" if any(r.metrics.finish_reason == "length" for r in readings) else "stop",
        drafts=readings[0].metrics.drafts,
        spec=spec,
        retried=any(reading.metrics.retried for reading in readings),
    )
    return PageText(text=text, token_ids=tuple(token for reading in readings for token in reading.token_ids), metrics=metrics)


def join_band(parts: list[PageText | None], is_table_row: bool) -> PageText:
    """A band from its parts' readings, left to right: a table's row from its cells' (None: an empty cell,
    not read), a line from its chunks', joined by spaces."""
    read = [part for part in parts if part is not None]
    if len(parts) == 1:
        return read[0]
    if is_table_row:
        text = table_row(["" if cell is None else cell_text(cell.text) for cell in parts])
    else:
        text = " ".join(chunk.text.strip() for chunk in read)
    return merged(read, text, sum(part.metrics.wall_s for part in read))


def join_regions(regions: list[PageText], wall_s: float) -> PageText:
    """One page from its bands' readings, in order; `wall_s` is the page's, from its first band to its last."""
    return merged(regions, joined_text([region.text for region in regions]), wall_s)


class _SeparatedStream:
    """Passes a band's streamed text on, preceded by its separator from the bands before (none for the first
    band), which depends on how the band's text starts: it is sent with the band's first text."""

    def __init__(self, on_text: TextCallback, previous: list[str]):
        self.on_text = on_text
        self.previous = previous
        self.separated = not previous

    def __call__(self, chunk: str) -> None:
        if not chunk:
            return
        if not self.separated:
            self.on_text(band_separator(self.previous, chunk))
            self.separated = True
        self.on_text(chunk)

    def finish(self) -> None:
        """After the band is read: the separator of a band read as nothing."""
        if not self.separated:
            self.on_text(band_separator(self.previous, ""))


class ReadByRegions(WrappedEngine):
    """Wraps any engine: each page is read as the bands and cells `page_regions` cuts it into."""

    def __init__(self, engine: Engine, split: RegionSplit, token_side: int):
        super().__init__(engine)
        self.split = split
        self.token_side = token_side

    def read(self, image: Image.Image, settings: GenerationSettings, on_text: TextCallback | None = None) -> PageText:
        started = time.perf_counter()
        regions: list[PageText] = []
        for band in page_regions(image, self.split, self.token_side):
            streamed = _SeparatedStream(on_text, [region.text for region in regions]) if on_text is not None else None
            if len(band.images) == 1:
                regions.append(self.engine.read(band.images[0], settings, streamed))
            else:  # a table's row or a line in chunks: streamed whole once its parts are read, as its text is theirs joined
                readings = [None if part is None else self.engine.read(part, settings) for part in band.images]
                regions.append(join_band(readings, band.is_table_row))
                if streamed is not None:
                    streamed(regions[-1].text)
            if streamed is not None:
                streamed.finish()
        return join_regions(regions, time.perf_counter() - started)

    def read_many(
        self, pages: Iterable[tuple[Key, Image.Image]], settings: GenerationSettings, concurrency: int
    ) -> Iterator[tuple[Key, PageText]]:
        """Every cell or chunk of every band of every page in flight, up to `concurrency` at once; a page comes
        back when its last is read."""
        readings: dict[Key, list[list[PageText | None]]] = {}
        table_rows: dict[Key, list[bool]] = {}
        unread: dict[Key, int] = {}
        started: dict[Key, float] = {}

        def parts() -> Iterator[tuple[tuple[Key, int, int], Image.Image]]:
            for key, image in pages:
                bands = page_regions(image, self.split, self.token_side)
                readings[key] = [[None] * len(band.images) for band in bands]
                table_rows[key] = [band.is_table_row for band in bands]
                unread[key] = sum(part is not None for band in bands for part in band.images)
                started[key] = time.perf_counter()
                for band_index, band in enumerate(bands):
                    for part_index, part in enumerate(band.images):
                        if part is not None:
                            yield (key, band_index, part_index), part

        for (key, band_index, part_index), region in self.engine.read_many(parts(), settings, concurrency):
            readings[key][band_index][part_index] = region
            unread[key] -= 1
            if not unread[key]:
                del unread[key]
                bands = [join_band(band, is_row) for band, is_row in zip(readings.pop(key), table_rows.pop(key))]
                yield key, join_regions(bands, time.perf_counter() - started.pop(key))
