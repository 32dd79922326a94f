"""Draw blocks onto a white page with the bundled DejaVu fonts (they cover ç ğ ı İ ö ş ü).

Layout is a single pass that records what to draw and where, so the canvas can
be sized to the content before anything is drawn.  Paragraphs wrap at word
boundaries; tables size their columns to their text and wrap cells only when
the table would not fit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from PIL import Image, ImageDraw, ImageFont

from ocr_app.synth.documents import Block, Heading, Paragraph, Table

FONTS_DIR = Path(__file__).resolve().parent / "fonts"
FAMILIES: dict[str, tuple[str, str]] = {  # name -> (regular, bold)
    "sans": ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf"),
    "serif": ("DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf"),
    "condensed": ("DejaVuSansCondensed.ttf", "DejaVuSans-Bold.ttf"),
    "mono": ("DejaVuSansMono.ttf", "DejaVuSansMono.ttf"),
}
# The type real Turkish documents are set in, by free clones with the same metrics where there is one, from
# Debian's packages (`make train-setup`): name -> (regular, bold, italic), under /usr/share.  Used where installed
# and where a recipe stage asks (`make_sample(fonts=...)`); the bundled DejaVu faces are Verdana's and Bitstream
# Vera's kin.  Segoe UI has no clone: Open Sans and Noto Sans are its nearest free kin.
_SHARE = Path("/usr/share")
_TTF, _OTF, _LM = "fonts/truetype", "fonts/opentype/urw-base35", "texmf/fonts/opentype/public/lm"
DOCUMENT_FAMILIES: dict[str, tuple[str, str, str]] = {
    "arial": (f"{_TTF}/liberation2/LiberationSans-Regular.ttf", f"{_TTF}/liberation2/LiberationSans-Bold.ttf",
              f"{_TTF}/liberation2/LiberationSans-Italic.ttf"),
    "times": (f"{_TTF}/liberation2/LiberationSerif-Regular.ttf", f"{_TTF}/liberation2/LiberationSerif-Bold.ttf",
              f"{_TTF}/liberation2/LiberationSerif-Italic.ttf"),
    "calibri": (f"{_TTF}/crosextra/Carlito-Regular.ttf", f"{_TTF}/crosextra/Carlito-Bold.ttf",
                f"{_TTF}/crosextra/Carlito-Italic.ttf"),
    "cambria": (f"{_TTF}/crosextra/Caladea-Regular.ttf", f"{_TTF}/crosextra/Caladea-Bold.ttf",
                f"{_TTF}/crosextra/Caladea-Italic.ttf"),
    "tahoma": ("wine/fonts/tahoma.ttf", "wine/fonts/tahomabd.ttf", "wine/fonts/tahoma.ttf"),  # no italic
    "helvetica": (f"{_OTF}/NimbusSans-Regular.otf", f"{_OTF}/NimbusSans-Bold.otf", f"{_OTF}/NimbusSans-Italic.otf"),
    "helvetica-narrow": (f"{_OTF}/NimbusSansNarrow-Regular.otf", f"{_OTF}/NimbusSansNarrow-Bold.otf",
                         f"{_OTF}/NimbusSansNarrow-Oblique.otf"),
    "nimbus-roman": (f"{_OTF}/NimbusRoman-Regular.otf", f"{_OTF}/NimbusRoman-Bold.otf", f"{_OTF}/NimbusRoman-Italic.otf"),
    "palatino": (f"{_OTF}/P052-Roman.otf", f"{_OTF}/P052-Bold.otf", f"{_OTF}/P052-Italic.otf"),
    "century": (f"{_OTF}/C059-Roman.otf", f"{_OTF}/C059-Bold.otf", f"{_OTF}/C059-Italic.otf"),
    "latin-modern": (f"{_LM}/lmroman10-regular.otf", f"{_LM}/lmroman10-bold.otf", f"{_LM}/lmroman10-italic.otf"),
    "latin-modern-sans": (f"{_LM}/lmsans10-regular.otf", f"{_LM}/lmsans10-bold.otf", f"{_LM}/lmsans10-oblique.otf"),
    "noto-sans": (f"{_TTF}/noto/NotoSans-Regular.ttf", f"{_TTF}/noto/NotoSans-Bold.ttf", f"{_TTF}/noto/NotoSans-Italic.ttf"),
    "noto-serif": (f"{_TTF}/noto/NotoSerif-Regular.ttf", f"{_TTF}/noto/NotoSerif-Bold.ttf",
                   f"{_TTF}/noto/NotoSerif-Italic.ttf"),
    "open-sans": (f"{_TTF}/open-sans/OpenSans-Regular.ttf", f"{_TTF}/open-sans/OpenSans-Bold.ttf",
                  f"{_TTF}/open-sans/OpenSans-Italic.ttf"),
    "roboto": (f"{_TTF}/roboto/unhinted/RobotoTTF/Roboto-Regular.ttf", f"{_TTF}/roboto/unhinted/RobotoTTF/Roboto-Bold.ttf",
               f"{_TTF}/roboto/unhinted/RobotoTTF/Roboto-Italic.ttf"),
    "charis": (f"{_TTF}/charis/CharisSIL-Regular.ttf", f"{_TTF}/charis/CharisSIL-Bold.ttf",
               f"{_TTF}/charis/CharisSIL-Italic.ttf"),
    "courier": (f"{_TTF}/liberation2/LiberationMono-Regular.ttf", f"{_TTF}/liberation2/LiberationMono-Bold.ttf",
                f"{_TTF}/liberation2/LiberationMono-Italic.ttf"),
    "nimbus-mono": (f"{_OTF}/NimbusMonoPS-Regular.otf", f"{_OTF}/NimbusMonoPS-Bold.otf", f"{_OTF}/NimbusMonoPS-Italic.otf"),
}
MONO_FAMILIES = ("mono", "courier", "nimbus-mono")
# Characters some of those faces lack (only Noto, Roboto and Charis have the lira sign), written as documents set
# in them write them.
SPELLED_OUT = {"₺": "TL"}
Grid = Literal["full", "rules", "none"]
A4_RATIO = 1.414


@lru_cache(maxsize=256)
def font(name: str, size: int) -> ImageFont.FreeTypeFont:
    """A bundled face by file name, or any face by absolute path, at `size` px."""
    return ImageFont.truetype(str(FONTS_DIR / name), size)


def family_files(family: str) -> tuple[str, str, str]:
    """(regular, bold, italic) of a bundled or document family; a bundled family has no italic."""
    if family in FAMILIES:
        regular, bold = FAMILIES[family]
        return regular, bold, regular
    return tuple(str(_SHARE / name) for name in DOCUMENT_FAMILIES[family])


@lru_cache(maxsize=1)
def installed_families() -> tuple[str, ...]:
    """The document families whose three faces are installed."""
    return tuple(name for name in DOCUMENT_FAMILIES if all(Path(path).is_file() for path in family_files(name)))


@lru_cache(maxsize=64)
def missing_characters(family: str) -> frozenset[str]:
    """Which of `SPELLED_OUT`'s characters the family's regular face has no glyph for."""
    face = font(family_files(family)[0], 20)
    blank = face.getmask("\uffff").getbbox()  # what an unknown character draws
    return frozenset(character for character in SPELLED_OUT if face.getmask(character).getbbox() == blank)


def spelled_for(family: str, text: str) -> str:
    """`text` with the characters the family lacks spelled out (`SPELLED_OUT`)."""
    for character in missing_characters(family):
        text = text.replace(character, SPELLED_OUT[character])
    return text


@dataclass(frozen=True)
class Style:
    family: str
    size: int  # body text, px
    ink: tuple[int, int, int]
    paper: tuple[int, int, int]
    margin: int
    grid: Grid
    heading_scale: float = 1.0  # on top of HEADING_SCALE; training pages vary it (`make_sample`)
    italic: bool = False  # regular text in the family's italic face (a document family's; bold stays upright)

    def font(self, bold: bool = False, scale: float = 1.0) -> ImageFont.FreeTypeFont:
        regular, bold_face, italic = family_files(self.family)
        return font(bold_face if bold else italic if self.italic else regular, max(8, round(self.size * scale)))


def random_style(rng: random.Random, families: tuple[str, ...] = ("sans", "serif", "condensed"),
                 size: tuple[int, int] = (14, 19)) -> Style:
    shade = rng.randint(10, 60)
    tint = rng.randint(238, 255)
    return Style(
        family=rng.choice(families),
        size=rng.randint(*size),
        ink=(shade, shade, shade + rng.randint(0, 25)),
        paper=(tint, tint, max(0, tint - rng.randint(0, 10))),
        margin=rng.randint(40, 80),
        grid=rng.choice(("full", "full", "rules", "none")),
    )


HEADING_SCALE = {1: 1.6, 2: 1.3, 3: 1.15}


@dataclass(frozen=True)
class Placed:
    """A word drawn on the page: where, in which face, and whose it is (the block's index in the document,
    its table cell as (row, column) with the header as row 0, and its index among the words of that block
    or cell), so the text of any stretch of rows can be written back as Markdown."""

    x: float
    y: float
    word: str
    face: ImageFont.FreeTypeFont
    block: int
    cell: tuple[int, int] | None
    index: int

    def ink_rows(self) -> tuple[int, int]:
        """(first, end) rows of the word's ink on the page, end exclusive."""
        _, top, _, bottom = self.face.getbbox(self.word)
        return round(self.y + top), round(self.y + bottom)


class _Layout:
    """Records text and rules at positions; `draw` paints them once the size is known."""

    def __init__(self, style: Style, width: int):
        self.style = style
        self.width = width
        self.left = style.margin
        self.right = width - style.margin
        self.y = style.margin
        self.texts: list[Placed] = []
        self.rules: list[tuple[float, float, float, float]] = []
        self.block = -1

    @staticmethod
    def line_height(face: ImageFont.FreeTypeFont) -> int:
        ascent, descent = face.getmetrics()
        return round((ascent + descent) * 1.2)

    def wrap(self, runs: list[tuple[str, ImageFont.FreeTypeFont]], width: float) -> list[list[tuple[str, ImageFont.FreeTypeFont, float]]]:
        """Greedy word wrap of (text, font) runs into lines of (word, font, width)."""
        lines: list[list[tuple[str, ImageFont.FreeTypeFont, float]]] = [[]]
        used = 0.0
        for content, face in runs:
            space = face.getlength(" ")
            for word in content.split():
                size = face.getlength(word)
                if lines[-1] and used + space + size > width:
                    lines.append([])
                    used = 0.0
                used += (space if lines[-1] else 0.0) + size
                lines[-1].append((word, face, size))
        return lines

    def place_lines(self, lines, left: float, width: float, top: float, align: str, height: int,
                    cell: tuple[int, int] | None = None) -> float:
        y = top
        index = 0
        for line in lines:
            spaces = [face.getlength(" ") for _, face, _ in line[1:]]
            total = sum(size for _, _, size in line) + sum(spaces)
            x = left + {"left": 0.0, "center": (width - total) / 2, "right": width - total}[align]
            for position, (word, face, size) in enumerate(line):
                self.texts.append(Placed(x, y, word, face, self.block, cell, index))
                index += 1
                x += size + (spaces[position] if position < len(spaces) else 0.0)
            y += height
        return y

    def add(self, block: Block) -> None:
        style = self.style
        self.block += 1
        if isinstance(block, Heading):
            face = style.font(bold=True, scale=HEADING_SCALE.get(block.level, 1.0) * style.heading_scale)
            lines = self.wrap([(block.text, face)], self.right - self.left)
            self.y = self.place_lines(lines, self.left, self.right - self.left, self.y, "left", self.line_height(face))
            self.y += style.size * 0.6
        elif isinstance(block, Paragraph):
            regular, bold = style.font(), style.font(bold=True)
            runs = ([(block.label, bold)] if block.label else []) + [(block.text, bold if block.bold else regular)]
            lines = self.wrap(runs, self.right - self.left)
            self.y = self.place_lines(lines, self.left, self.right - self.left, self.y, block.align,
                                      self.line_height(regular))
            self.y += style.size * 0.5
        else:
            self.add_table(block)

    def add_table(self, table: Table) -> None:
        regular, bold = self.style.font(), self.style.font(bold=True)
        pad = max(4, self.style.size // 2)
        available = self.right - self.left
        natural = [
            max([bold.getlength(table.header[c])] + [regular.getlength(row[c]) for row in table.rows]) + 2 * pad
            for c in range(len(table.header))
        ]
        widths = list(natural)
        excess = sum(widths) - available
        if excess > 0:  # narrow the text columns (never the numbers), which then wrap
            text_columns = [c for c, numeric in enumerate(table.numeric) if not numeric] or list(range(len(widths)))
            share = sum(widths[c] for c in text_columns)
            for c in text_columns:
                widths[c] = max(4 * pad, widths[c] - excess * widths[c] / share)
        height = self.line_height(regular)
        top = self.y
        edges = [self.left]
        for width in widths:
            edges.append(edges[-1] + width)
        row_tops = [top]
        for row_index, row in enumerate((table.header, *table.rows)):
            face = bold if row_index == 0 else regular
            cells = [self.wrap([(cell, face)], widths[c] - 2 * pad) for c, cell in enumerate(row)]
            for c, lines in enumerate(cells):
                align = "right" if table.numeric[c] and row_index > 0 else "left"
                self.place_lines(lines, edges[c] + pad, widths[c] - 2 * pad, row_tops[-1] + pad / 2, align, height,
                                 (row_index, c))
            row_tops.append(row_tops[-1] + max(len(lines) for lines in cells) * height + pad)
        bottom = row_tops[-1]
        if self.style.grid == "full":
            self.rules += [(edges[0], y, edges[-1], y) for y in row_tops]
            self.rules += [(x, top, x, bottom) for x in edges]
        elif self.style.grid == "rules":
            self.rules += [(edges[0], y, edges[-1], y) for y in (top, row_tops[1], bottom)]
        self.y = bottom + self.style.size

    def draw(self, height: int) -> Image.Image:
        image = Image.new("RGB", (self.width, height), self.style.paper)
        pen = ImageDraw.Draw(image)
        for x0, y0, x1, y1 in self.rules:
            pen.line([(x0, y0), (x1, y1)], fill=self.style.ink, width=1)
        for placed in self.texts:
            pen.text((placed.x, placed.y), placed.word, font=placed.face, fill=self.style.ink)
        return image


def render_blocks(blocks: tuple[Block, ...], style: Style, width: int, min_height: int = 0) -> Image.Image:
    """The blocks drawn top to bottom on a page `width` wide, as tall as they need (at least `min_height`)."""
    return place_blocks(blocks, style, width, min_height)[0]


def place_blocks(blocks: tuple[Block, ...], style: Style, width: int, min_height: int = 0) -> tuple[Image.Image, list[Placed]]:
    """`render_blocks`, and every word drawn with where it is."""
    layout = _Layout(style, width)
    for block in blocks:
        layout.add(block)
    return layout.draw(max(min_height, round(layout.y + style.margin))), layout.texts


def render_line(content: str, style: Style, bold_words: int = 0, margins: tuple[int, int, int, int] = (0, 0, 0, 0)) -> Image.Image:
    """One line of text on a canvas just larger than it, plus blank `margins` (left, top, right, bottom) in px;
    its first `bold_words` words in bold, as a form's label before its value."""
    words = content.split(" ")
    runs = [(" ".join(words[:bold_words]), style.font(bold=True)), (" ".join(words[bold_words:]), style.font())]
    runs = [(text, face) for text, face in runs if text]
    starts = [0.0]  # x of each run
    for text, face in runs[:-1]:
        starts.append(starts[-1] + face.getlength(text) + style.font().getlength(" "))
    last_text, last_face = runs[-1]
    width = int(starts[-1] + last_face.getbbox(last_text)[2])
    pad_x, pad_y = style.size // 2 + 2, style.size // 3 + 2
    ascent, descent = max(face.getmetrics() for _, face in runs)
    margin_left, margin_top, margin_right, margin_bottom = margins
    size = (width + 2 * pad_x + margin_left + margin_right, ascent + descent + 2 * pad_y + margin_top + margin_bottom)
    image = Image.new("RGB", size, style.paper)
    draw = ImageDraw.Draw(image)
    for start, (text, face) in zip(starts, runs):
        draw.text((pad_x + margin_left + start, pad_y + margin_top), text, font=face, fill=style.ink)
    return image
