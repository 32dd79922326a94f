"""Ink: which rows and columns of a page hold ink, the paper's colour, and a text line's height."""

from __future__ import annotations

import numpy as np
from PIL import Image

# Ink is darker than the paper by this much (of 255); scan noise (sigma <= 14) stays well under it.
INK_CONTRAST = 80
# A row holds ink when more than this share of its pixels do: a few noise specks keep a row blank.
INK_SHARE = 0.002
# Between two lines set tight, rows hold only descenders, ascenders and accents: under this share of the
# ink of the band's busiest row (a row through the letters' bodies crosses every stroke).  Not higher: the
# body of a short line (a signature under a paragraph) holds little ink beside a full line's.
LIGHT_SHARE = 0.1


def median_level(levels: np.ndarray) -> int:
    """`int(np.median(levels))` of uint8 `levels` (any shape), read off their histogram: one pass over a
    4-MP page instead of a partition of its pixels."""
    cumulative = np.cumsum(np.bincount(levels.ravel(), minlength=256))  # [256]
    middle = levels.size // 2
    upper = int(np.searchsorted(cumulative, middle + 1))  # the sorted levels' element `middle`
    if levels.size % 2:
        return upper
    return (int(np.searchsorted(cumulative, middle)) + upper) // 2  # the mean of the two middle ones, floored


def ink_mask(image: Image.Image, contrast: int = INK_CONTRAST) -> np.ndarray:
    """[H, W] bool: the pixels of `image` darker than its paper (the median) by `contrast`."""
    gray = np.asarray(image.convert("L"))  # [H, W] uint8
    return gray.astype(np.int16) < median_level(gray) - contrast


def ink_per_row(image: Image.Image) -> np.ndarray:
    """[H] int: how many pixels of each row of `image` are ink."""
    return ink_mask(image).sum(axis=1)


def ink_rows(image: Image.Image) -> np.ndarray:
    """[H] bool: the rows of `image` that hold ink."""
    return ink_per_row(image) > INK_SHARE * image.width


def inked_columns(image: Image.Image, top: int, bottom: int) -> np.ndarray:
    """[W] bool: the columns of `image` with ink in rows top..bottom-1."""
    return ink_mask(image.crop((0, top, image.width, bottom))).any(axis=0)


def blank_runs(inked: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each run of blank rows in `inked` ([H] bool), end exclusive."""
    blank = np.concatenate(([False], ~inked, [False]))
    changes = np.flatnonzero(blank[1:] != blank[:-1])  # starts and ends alternate
    return [(int(start), int(end)) for start, end in zip(changes[::2], changes[1::2])]


def inner_runs(inked: np.ndarray) -> list[tuple[int, int]]:
    """The blank runs of `inked` ([h] bool) with ink above and below them."""
    return [(start, end) for start, end in blank_runs(inked) if start > 0 and end < inked.size]


def paper_color(image: Image.Image) -> tuple[int, ...]:
    pixels = np.asarray(image.convert("RGB"))  # [H, W, 3]
    return tuple(median_level(pixels[..., channel]) for channel in range(3))


def painted_over(image: Image.Image, mask: np.ndarray) -> Image.Image:
    """`image` with the pixels of `mask` ([H, W] bool) painted in its paper's colour; `image` itself if none."""
    if not mask.any():
        return image
    painted = np.asarray(image.convert("RGB")).copy()  # [H, W, 3]
    painted[mask] = paper_color(image)
    return Image.fromarray(painted)


def line_height(ink: np.ndarray) -> int:
    """The height of a band's text line (`ink`: [h] ink pixels per row of the band): its longest run of rows
    holding at least a tenth of the ink of its busiest row.  Not the band's ink height: a table row's band
    also holds its cell borders' rules, and a line's accents and descender tails hold little ink."""
    return max(end - start for start, end in blank_runs(ink < LIGHT_SHARE * ink.max()))


def line_heights(ink: np.ndarray, rows: list[tuple[int, int]]) -> list[int]:
    """`line_height` of each band at `rows` of a page with `ink` pixels per row ([H])."""
    return [line_height(ink[top:bottom]) for top, bottom in rows]
