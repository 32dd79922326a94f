"""Tables: the rows of a table whose columns are set apart by space alone, cut into their cells."""

from __future__ import annotations

import numpy as np

from ocr_app.config import RegionSplit
from ocr_app.regions.ink import blank_runs, inner_runs


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
