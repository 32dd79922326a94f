"""Graphics: ink that is no text (a QR code, an emblem, a signature, a stamp's large letters), found as pieces of
joined ink far larger than the page's letters, and painted over before the page is cut into bands."""

from __future__ import annotations

import cv2
import numpy as np

# Pieces of ink lower than this many rows are specks (a scan's grain, a dot, a comma), not letters, and do not
# count towards the letters' median height.
LETTER_MIN_ROWS = 3
# A graphic whose ink fills this share of its box is a picture (a QR code: 0.52-0.53, logos 0.43-0.61 on the
# real benchmark's pages); a frame's, a ring's or a stroke's fills under a quarter (0.03-0.26), and a box drawn
# round a word (an organisation chart's) holds words that are no part of it.
DENSE_SHARE = 0.35
# What a ring closes in fills at most this share of its own box (a disc: π/4; the emblems' and seals' holes on the
# real pages fill 0.78-0.80), and is at most this many times wider than high or higher than wide (they: 1.03); a
# box drawn round words closes in a rectangle (an organisation chart's, a shadow's box overlapping it: 0.81-1.00
# filled, 1.29-2.6 times wider than high).
ROUND_FILL = 0.85
ROUND_ASPECT = 1.2


def _round_holes(piece: np.ndarray) -> np.ndarray:
    """[h, w] bool: the round holes of a piece (`piece`: [h, w] bool, its own ink in its box), what a seal's or an
    emblem's ring closes in: about as high as wide, and filling π/4 of its box as a disc does; not a box drawn
    round words, whose hole is a rectangle (filling its box, but where another box overlaps it) and most often
    wider than high."""
    # [h + 2, w + 2]: paper all round, so that one fill reaches all the paper outside
    paper = np.pad(~piece, 1, constant_values=True).astype(np.uint8)
    cv2.floodFill(paper, None, (0, 0), 0)  # the paper outside gone: 4-connected, as 8-connected ink closes it in
    _, labels, stats, _ = cv2.connectedComponentsWithStats(paper[1:-1, 1:-1], connectivity=4)
    widths, heights, areas = stats[1:, cv2.CC_STAT_WIDTH], stats[1:, cv2.CC_STAT_HEIGHT], stats[1:, cv2.CC_STAT_AREA]
    squarish = np.maximum(widths, heights) <= ROUND_ASPECT * np.minimum(widths, heights)  # [pieces]
    round_holes = (areas <= ROUND_FILL * widths * heights) & squarish
    return np.concatenate(([False], round_holes))[labels]


def graphic_mask(dark: np.ndarray, size: float) -> np.ndarray:
    """[H, W] bool: the graphics of a page whose ink is `dark` ([H, W] bool, its rules erased), and a pixel
    around them.  A graphic is an 8-connected piece of ink both higher and wider than `size` times the median
    height of the page's pieces (its letters': most of a page's ink is lower-case letters, each a piece of its
    own, or a word where a scan's blur joins them).  A letter is never that high, a line of words never that
    high, two lines a blur joins are about 4 letters high; a QR code, an emblem or a stamp's letter is 6-40 of
    them high and as wide.  A graphic whose ink fills DENSE_SHARE of its box (a QR code, a logo, a photo) is
    painted over box and all: erasing its rules broke it into pieces, most too small to count.  Any other (an
    emblem's ring, a seal, a signature, a stamp's letters) is painted where its own ink is, and where the ink it
    closes in is, in a round hole (`_round_holes`: the small letters round a seal's ring; a box's words are text).
    The pixel around is a stroke's anti-aliased edge, lighter than ink, that would be left as a faint outline."""
    _, labels, stats, _ = cv2.connectedComponentsWithStats(dark.astype(np.uint8), connectivity=8)
    lefts, tops, widths, heights, areas = stats[1:].T  # each [pieces]
    letters = heights[heights >= LETTER_MIN_ROWS]
    graphics = np.zeros(dark.shape, bool)  # [H, W]
    if letters.size == 0:
        return graphics
    limit = size * float(np.median(letters))
    for index in np.flatnonzero((heights > limit) & (widths > limit)):
        box = slice(tops[index], tops[index] + heights[index]), slice(lefts[index], lefts[index] + widths[index])
        if areas[index] >= DENSE_SHARE * widths[index] * heights[index]:
            graphics[box] = True
            continue
        piece = labels[box] == index + 1  # [h, w]
        graphics[box] |= piece | (_round_holes(piece) & dark[box])
    return cv2.dilate(graphics.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)  # [H, W]
