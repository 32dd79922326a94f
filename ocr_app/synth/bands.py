"""Bands: a stretch of a drawn document cut as `ocr_app.regions` cuts a page, with the Markdown of its words.

A reader of bands trained on words and lines drawn alone never sees what a
page's band holds: a table row with wide gaps between its cells (its rules
erased, as at reading time), a heading in large bold type, a bold label before its value, a line
enlarged with the rest of its page.  Here a document's blocks are drawn, cut
into bands by the very code that cuts a page at reading time, and one band is
picked; its answer is written from the words drawn in it, so it matches the
band character for character.
"""

from __future__ import annotations

import random

from PIL import Image

from ocr_app.config import RegionSplit
from ocr_app.regions import cell_text, cut_band, page_bands, paper_color, table_row
from ocr_app.synth.degrade import degrade
from ocr_app.synth.documents import Block, Heading, Paragraph, Table
from ocr_app.synth.render import Placed, Style, place_blocks

# Qwen3.5's visual token: 16-px patches merged 2x2; a band is padded to whole tokens, as `ocr-read` pads it.
TOKEN_SIDE = 32


def band_markdown(blocks: tuple[Block, ...], words: list[Placed]) -> str:
    """The Markdown of `words` (those drawn in one band), block by block: a heading's line with its `#`s, a
    paragraph's line with its bold label or bold text in `**`, a table's rows as `| a | b |` (no delimiter
    row: it is not drawn)."""
    parts = []
    for block_index in sorted({word.block for word in words}):
        block = blocks[block_index]
        mine = sorted((word for word in words if word.block == block_index), key=lambda word: (word.y, word.x))
        if isinstance(block, Heading):
            parts.append(f"{'#' * block.level} {_joined(mine)}")
        elif isinstance(block, Paragraph):
            parts.append(_paragraph_line(block, mine))
        else:
            parts.append(_table_rows(block, mine))
    return "\n\n".join(parts)


def _joined(words: list[Placed]) -> str:
    return " ".join(word.word for word in words)


def _paragraph_line(paragraph: Paragraph, words: list[Placed]) -> str:
    label_words = len(paragraph.label.split())
    label = _joined([word for word in words if word.index < label_words])
    body = _joined([word for word in words if word.index >= label_words])
    parts = [f"**{label}**"] if label else []
    if body:
        parts.append(f"**{body}**" if paragraph.bold else body)
    return " ".join(parts)


def _table_rows(table: Table, words: list[Placed]) -> str:
    rows = sorted({word.cell[0] for word in words})
    return "\n".join(
        table_row(tuple(_joined([word for word in words if word.cell == (row, column)]) for column in range(len(table.header))))
        for row in rows
    )


def _middle_row(word: Placed) -> float:
    top, bottom = word.ink_rows()
    return (top + bottom) / 2


def words_by_band(rows: list[tuple[int, int]], spans: list[tuple[int, int]], placed: list[Placed]) -> list[list[Placed]]:
    """The words drawn in each band at `rows` spanning columns `spans` (`regions.page_bands`): those whose ink's
    middle row and middle column lie in it."""
    return [
        [word for word in placed if top <= _middle_row(word) < bottom and left <= _middle_column(word) < right]
        for (top, bottom), (left, right) in zip(rows, spans)
    ]


def _middle_column(word: Placed) -> float:
    left, _, right, _ = word.face.getbbox(word.word)
    return word.x + (left + right) / 2


def draw_band(
    rng: random.Random, blocks: tuple[Block, ...], style: Style, width: int, degradation: str, split: RegionSplit
) -> tuple[Image.Image, str]:
    """One band of `blocks` drawn `width` wide, cut and enlarged by `split` as `ocr-read` would cut their page,
    with the `degradation`'s damage, and its Markdown; of a band read in parts (`regions.band_parts`: a
    table's row's cells, a long line's chunks), one part, a cell written as a cell is.  Only bands and parts
    holding words are picked."""
    page, placed = place_blocks(blocks, style, width)
    bands = page_bands(page, split)
    words_in = words_by_band(bands.rows, bands.spans, placed)
    index = rng.choice([index for index, words in enumerate(words_in) if words])
    top, bottom = bands.rows[index]
    parts, is_table_row = bands.parts[index]
    in_parts = [
        (columns, [word for word in words_in[index] if columns[0] <= _middle_column(word) < columns[1]])
        for columns in parts
        if columns is not None
    ]
    columns, words = rng.choice([(columns, words) for columns, words in in_parts if words])
    markdown = band_markdown(blocks, words)
    image = damaged_part(bands.image, top, bottom, columns, split, bands.scale, degradation, rng)
    return image, cell_text(markdown) if is_table_row else markdown


def damaged_part(
    page: Image.Image, top: int, bottom: int, columns: tuple[int, int], split: RegionSplit, scale: float,
    degradation: str, rng: random.Random, zoom: tuple[float, float] = (1.0, 1.0),
) -> Image.Image:
    """Rows top..bottom-1 and `columns` of the cut page cut as `regions.cut_band` cuts them (enlarged by `scale`;
    pixels from `page`, the cut page or a rendering of it `zoom` times larger), with the `degradation`'s damage.
    The damage is done to the band's rows and some paper around them, not to the page: the same blur, grain and
    compression for a fraction of the pixels.  Not turned: a turned band would hold other words."""
    zoom_y = zoom[1]
    above = max(0, top - split.margin)
    first, end = round(above * zoom_y), min(page.height, round((bottom + split.margin) * zoom_y))
    stretch = degrade(page.crop((0, first, page.width, end)), degradation, rng, turn=False)
    return cut_band(stretch, top - above, bottom - above, columns, split, scale, TOKEN_SIDE, paper_color(stretch), zoom)
