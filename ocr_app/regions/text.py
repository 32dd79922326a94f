"""Text: the readings of a page's parts joined into its Markdown (bands a blank line apart, a table's rows one table)."""

from __future__ import annotations

SEPARATOR = "\n\n"


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
