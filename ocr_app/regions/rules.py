"""Rules erased: a table's borders and underlines painted over in the paper's colour before a page is cut."""

from __future__ import annotations

import cv2
import numpy as np
from PIL import Image

from ocr_app.regions.ink import blank_runs, ink_mask, painted_over

# A rule (a table's border, an underline) is a straight run of ink at least this share of the page's width
# when horizontal, of its height when vertical, and at least this many pixels.  Letters' runs on
# samples/tob-mini's pages are shorter: under 96 across (the feet of a blurred bold serif line) and 48 down.
RULE_SHARE = (1 / 8, 1 / 20)
MIN_RULE = (96, 48)
RULE_THICKNESS = 6
# A rule's pixels are darker than the paper by this much: a thin rule blurred by a scan is lighter than letters.
RULE_CONTRAST = 40
# A vertical rule through this share of a band's rows is a wall between two of its cells: all of them in a ruled
# table's row, but a scan's noise can break a thin rule's run for a row or two.
WALL_SHARE = 0.8


def in_long_runs(ink: np.ndarray, length: int) -> np.ndarray:
    """[H, W] bool: the pixels of `ink` ([H, W] bool) in a run of at least `length` inked pixels along a row.
    An opening by a row of `length`: the erosion marks where a full run starts (its anchor on the run's first
    pixel), the dilation spreads each start over its run (anchor on the last); beyond the image is paper."""
    row = np.ones((1, length), np.uint8)
    starts = cv2.erode(np.ascontiguousarray(ink, dtype=np.uint8), row, anchor=(0, 0),
                       borderType=cv2.BORDER_CONSTANT, borderValue=0)  # [H, W]
    return cv2.dilate(starts, row, anchor=(length - 1, 0), borderType=cv2.BORDER_CONSTANT, borderValue=0).astype(bool)


def _thickened(mask: np.ndarray, axis: int) -> np.ndarray:
    """`mask` ([H, W] bool) with each set pixel's neighbours along `axis` set too."""
    padded = np.pad(mask, [(1, 1) if side == axis else (0, 0) for side in range(2)])
    size = mask.shape[axis]
    return np.take(padded, range(0, size), axis=axis) | mask | np.take(padded, range(2, size + 2), axis=axis)


def rule_masks(image: Image.Image) -> tuple[np.ndarray, np.ndarray]:
    """[H, W] bool each: the pixels of `image`'s horizontal rules and of its vertical ones (`RULE_SHARE`), a
    pixel around them too (their anti-aliased edges)."""
    ink = ink_mask(image, RULE_CONTRAST)  # [H, W]
    height, width = ink.shape
    across_length, down_length = (max(least, round(share * side)) for least, share, side in zip(MIN_RULE, RULE_SHARE, (width, height)))
    # A rule skewed by a degree steps aside a pixel every 57: runs are sought in ink thickened by a pixel across.
    # A rule is thin: ink thicker than RULE_THICKNESS across it (a picture, a shaded cell, a letter's stem
    # where it touches the rule) is not a rule.
    across, down = np.zeros_like(ink), np.zeros_like(ink)
    if width >= across_length:
        across = in_long_runs(_thickened(ink, axis=0), across_length) & ~in_long_runs(ink.T, RULE_THICKNESS + 1).T
    if height >= down_length:
        down = in_long_runs(_thickened(ink, axis=1).T, down_length).T & ~in_long_runs(ink, RULE_THICKNESS + 1)
    return tuple(_thickened(_thickened(mask, axis=0), axis=1) if mask.any() else mask for mask in (across, down))


def letter_ink(image: Image.Image, down: np.ndarray) -> np.ndarray:
    """[H, W] bool: the ink of `image` (not erased) but for its rules' own pixels: runs along a row as long as a
    horizontal rule's, and its vertical rules `down` (`rule_masks`).  The letters' feet and accents that touch a
    horizontal rule's edge stay, where `erase_rules` paints over the pixels around a rule with it."""
    ink = ink_mask(image)  # [H, W]
    across_length = max(MIN_RULE[0], round(RULE_SHARE[0] * ink.shape[1]))
    return ink & ~in_long_runs(ink, across_length) & ~down


def erase_rules(image: Image.Image, rules: np.ndarray | None = None) -> Image.Image:
    """`image` with its `rules` ([H, W] bool; by default both `rule_masks`) painted over in the paper's colour:
    a table's borders join its rows into one band and its columns into one cell, and the model reads text, not
    lines."""
    if rules is None:
        across, down = rule_masks(image)
        rules = across | down
    return painted_over(image, rules)


def walls(down: np.ndarray, top: int, bottom: int) -> list[int]:
    """The columns where a vertical rule (`down`: [H, W] bool, `rule_masks`) crosses rows top..bottom-1 of the
    page, at least WALL_SHARE of them: a ruled table's column borders through one of its rows, each at its
    middle."""
    crossed = down[top:bottom].mean(axis=0) >= WALL_SHARE  # [W]
    return [(start + end) // 2 for start, end in blank_runs(~crossed)]
