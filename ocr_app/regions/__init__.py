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
turned level before it is cut, a table's rules are erased, and graphics (a QR
code, a logo, a seal) painted over.

`ReadByRegions` wraps any engine so: `read` reads the bands one after another
(streamed, with the blank line between them), `read_many` puts every band (or
cell) of every page in flight and hands back a page once its last is read.

One module per step:

    deskew.py  a skewed scan turned level (`deskewed`)
    rules.py   a table's borders erased (`erase_rules`), its vertical ones kept as walls between cells (`walls`)
    graphics.py  QR codes, logos, seals, signatures and stamps found (`graphic_mask`) to be painted over
    ink.py     which rows and columns hold ink; a line's height
    bands.py   rows cut into bands, a tall one into column blocks (`block_bands`), each reaching over the
               faint rows of tails and accents beside it (`faint_edges`) and keeping its own
               lines' ink (`own_ink`); a band enlarged and
               padded as the model reads it (`cut_band`)
    tables.py  a table's rows cut into cells: at its rules (`walled_cells`) or where space sets them
               apart (`table_cells`)
    chunks.py  a long line cut at word gaps (`line_chunks`)
    page.py    the steps in order: a page cut into bands (`page_bands`, which training cuts with too) and
               the images the model reads (`page_regions`, `split_page`), taken from a sharper rendering
               of the page when there is one (`part_source`)
    text.py    the parts' readings joined into the page's Markdown (`joined_text`)
    reader.py  `ReadByRegions`, the engine wrapper
"""

from ocr_app.regions.bands import MAX_ENLARGEMENT, band_rows, cut_band, enlargement, own_ink, rows_of_bands
from ocr_app.regions.chunks import CHUNK_CUT_FROM, WORD_GAP, line_chunks
from ocr_app.regions.deskew import deskewed, skew_angle
from ocr_app.regions.ink import ink_per_row, ink_rows, inked_columns, line_height, line_heights, paper_color
from ocr_app.regions.page import Band, PageBands, band_parts, fitted_page, page_bands, page_regions, part_source, split_page
from ocr_app.regions.reader import ReadByRegions
from ocr_app.regions.rules import erase_rules
from ocr_app.regions.tables import cell_columns, table_cells
from ocr_app.regions.text import SEPARATOR, cell_text, joined_text, table_row

__all__ = [
    "CHUNK_CUT_FROM", "MAX_ENLARGEMENT", "SEPARATOR", "WORD_GAP", "Band", "PageBands", "ReadByRegions", "band_parts", "band_rows",
    "cell_columns", "cell_text", "cut_band", "deskewed", "enlargement", "erase_rules", "ink_per_row", "ink_rows",
    "inked_columns", "joined_text", "line_chunks", "line_height", "line_heights", "own_ink", "fitted_page", "page_bands", "page_regions",
    "paper_color", "part_source",
    "rows_of_bands", "skew_angle", "split_page", "table_cells", "table_row",
]
