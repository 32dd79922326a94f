"""Graphics: ink that is no text (a QR code, an emblem, a signature, a stamp's large letters), found as pieces of
joined ink far larger than the page's letters, and painted over before the page is cut into bands."""

from __future__ import annotations

import cv2
import numpy as np
from PIL import Image

from ocr_app.regions.ink import paper_color

# Pieces of ink lower than this many rows are specks (a scan's grain, a dot, a comma), not letters, and do not
# count towards the letters' median height.
LETTER_MIN_ROWS = 3
# A graphic whose ink fills this share of its box is a picture (a QR code: 0.52-0.53, logos 0.43-0.61 on the
# real benchmark's pages); a frame's, a ring's or a stroke's fills under a quarter (0.03-0.26), and a box drawn
# round a word (an organisation chart's) holds words that are no part of it.
DENSE_SHARE = 0.35


def graphic_mask(dark: np.ndarray, size: float) -> np.ndarray:
    """[H, W] bool: the graphics of a page whose ink is `dark` ([H, W] bool, its rules erased), and a pixel
    around them.  A graphic is an 8-connected piece of ink both higher and wider than `size` times the median
    height of the page's pieces (its letters': most of a page's ink is lower-case letters, each a piece of its
    own, or a word where a scan's blur joins them).  A letter is never that high, a line of words never that
    high, two lines a blur joins are about 4 letters high; a QR code, an emblem or a signature is 10-40 of them
    high and as wide.  A graphic whose ink fills DENSE_SHARE of its box (a QR code, a logo, a photo) is
    painted over box and all: erasing its rules broke it into pieces, most too small to count; any other (an
    emblem's ring, a signature, a stamp's letters, a box drawn round words) only where its own ink is.  The
    pixel around is a stroke's anti-aliased edge, lighter than ink, that would be left as a faint outline."""
    count, labels, stats, _ = cv2.connectedComponentsWithStats(dark.astype(np.uint8), connectivity=8)
    lefts, tops, widths, heights, areas = stats[1:].T  # each [count - 1]
    letters = heights[heights >= LETTER_MIN_ROWS]
    graphics = np.zeros(dark.shape, np.uint8)  # [H, W]
    if letters.size == 0:
        return graphics.astype(bool)
    limit = size * float(np.median(letters))
    graphic = (heights > limit) & (widths > limit)  # [count - 1]
    graphics[np.concatenate(([False], graphic & (areas < DENSE_SHARE * widths * heights)))[labels]] = 1
    for index in np.flatnonzero(graphic & (areas >= DENSE_SHARE * widths * heights)):
        graphics[tops[index] : tops[index] + heights[index], lefts[index] : lefts[index] + widths[index]] = 1
    return cv2.dilate(graphics, np.ones((3, 3), np.uint8)).astype(bool)  # [H, W]


def erase_graphics(image: Image.Image, graphics: np.ndarray) -> Image.Image:
    """`image` with its `graphics` ([H, W] bool, `graphic_mask`) painted in the paper's colour: cut as a band,
    a QR code or an emblem is read as invented text, and a stamp set across a table joins its rows."""
    erased = np.asarray(image.convert("RGB")).copy()  # [H, W, 3]
    erased[graphics] = paper_color(image)
    return Image.fromarray(erased)
