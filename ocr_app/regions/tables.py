"""Tables: the rows of a table cut into their cells, at its erased vertical rules or where its columns are set apart by space."""

from __future__ import annotations

import numpy as np

from ocr_app.config import RegionSplit
from ocr_app.regions.ink import blank_runs, inner_runs

# Rows of each table that `stacked_tables` finds in a run of bands cut into several.
MIN_STACKED_ROWS = 3


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


def walled_cells(inked: np.ndarray, walls: list[int], margin: int) -> list[tuple[int, int] | None] | None:
    """(left, right) columns of each cell of a band of a ruled table, whose inked columns are `inked` ([W] bool) and
    whose cells' borders were vertical rules at columns `walls`: each cell's ink widened by `margin` but not past
    its walls, None for a cell without ink (none before the first inked cell or after the last).  None when the
    walls part the band's ink into fewer than two cells: a box drawn around a line is no table."""
    edges = [0, *walls, inked.size]
    cells = []
    for left, right in zip(edges, edges[1:]):
        ink = np.flatnonzero(inked[left:right])
        cells.append((max(left, left + int(ink[0]) - margin), min(right, left + int(ink[-1]) + 1 + margin)) if ink.size else None)
    inked_cells = [index for index, cell in enumerate(cells) if cell is not None]
    if len(inked_cells) < 2:
        return None
    return cells[inked_cells[0] : inked_cells[-1] + 1]


def shared_columns(inked: list[np.ndarray], gaps: list[int], margin: int) -> list[tuple[int, int]]:
    """`cell_columns` of bands read as one table (`inked`: each [W] bool; `gaps`: each band's cell gap): cut
    where every one of them is blank, at their median gap."""
    return cell_columns(np.any(inked, axis=0), int(np.median(gaps)), margin)


def stacked_tables(inked: list[np.ndarray], gaps: list[int]) -> list[tuple[int, int]]:
    """(start, end) of each table in a run of bands that each part at blank columns (`inked`: each [W] bool;
    `gaps`: each band's cell gap), end exclusive.  A band joins the table above it when together they part into
    at least two cells, and half of the table's and of each of their rows' own, and the band has ink in a
    cell that the table above has ink in too.  Tables stacked with no line between them (an invoice's
    key/value header over its items, run together by a scan's blur) so keep their own columns: read as one
    table, they shared no blank column, and each row was read whole.  Lines whose cells lie apart from those
    above (a receipt's totals, right, under its items, left) are no row of their table."""
    own = [len(cell_columns(ink, gap, 0)) for ink, gap in zip(inked, gaps)]
    tables = []
    start, table = 0, own[0]
    for end in range(1, len(inked)):
        columns = shared_columns(inked[start : end + 1], gaps[start : end + 1], 0)
        above = np.any(inked[start:end], axis=0)  # [W]
        aligned = any(inked[end][left:right].any() and above[left:right].any() for left, right in columns)
        if not aligned or len(columns) < max(2, table / 2, max(own[start : end + 1]) / 2):
            tables.append((start, end))
            start, table = end, own[end]
        else:
            table = len(columns)
    return tables + [(start, len(inked))]


def table_cells(inked: list[np.ndarray], heights: list[int], split: RegionSplit) -> list[list[tuple[int, int] | None]]:
    """(left, right) columns of each cell of each band whose inked columns are `inked` (each [W] bool) and line
    `heights` high, None for a cell without ink.  A band is one cell, its ink's columns plus `split.margin`,
    unless it is one of two or more bands in a row whose ink parts at blank columns
    `split.cell_gap` times their line's height wide (words are a third of it apart): a table's rows, with
    its columns set apart by space alone (`stacked_tables` parts such a run into its tables).  A table's
    bands are all cut where every one of them is blank, so that each row has the table's columns, even a row
    with an empty cell."""
    cells: list[list[tuple[int, int] | None]] = [cell_columns(ink, ink.size, split.margin) for ink in inked]
    if split.cell_gap is None:
        return cells
    gaps = [max(1, round(split.cell_gap * height)) for height in heights]
    parted = np.array([len(cell_columns(ink, gap, split.margin)) > 1 for ink, gap in zip(inked, gaps)])
    tables = []
    for run_start, run_end in blank_runs(~parted):  # runs of parted bands
        stacked = stacked_tables(inked[run_start:run_end], gaps[run_start:run_end])
        # Two lines share a blank column by chance more often than three (a receipt's centred lines, "TARİH: ...
        # SAAT: ..."): a run that is one table needs two rows, each table of a run cut in several three.
        least = 2 if len(stacked) == 1 else MIN_STACKED_ROWS
        tables += [(run_start + start, run_start + end) for start, end in stacked if end - start >= least]
    for start, end in tables:
        table = shared_columns(inked[start:end], gaps[start:end], split.margin)
        for band in range(start, end):
            cells[band] = [columns if inked[band][columns[0] : columns[1]].any() else None for columns in table]
    return cells
