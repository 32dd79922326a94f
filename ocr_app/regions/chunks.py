"""Chunks: a line too long for a small model to keep its place along, cut at word gaps."""

from __future__ import annotations

import numpy as np

from ocr_app.config import RegionSplit
from ocr_app.regions.ink import inner_runs

# Words are apart by more than this share of their line's height (see `line_chunks`).
WORD_GAP = 0.25
# A chunk's cut is the widest word gap in the last part of its room, from this share of it on.
CHUNK_CUT_FROM = 0.6


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
