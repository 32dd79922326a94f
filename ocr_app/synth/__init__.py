"""Synthetic Turkish document images with exact Markdown ground truth, for training and for the sample benchmark.

    from ocr_app.synth import render_sample, training_seeds
    image, markdown = render_sample(seed, level="line")            # PIL RGB image, its exact text
    image, markdown = render_sample(seed, level="page", kind="invoice", degradation="scan")

Levels form a curriculum: `word` (one token), `line` (one line of text),
`block` (one to three consecutive blocks of a document: headings, paragraphs,
tables), `page` (a whole invoice, letter, article, receipt or form).  `band` is
one band of such blocks as `ocr_app.regions` cuts a page for a reader of lines
(see `ocr_app.synth.bands`); it needs that cut's `RegionSplit`.  Words and
lines take a few ms, pages tens of ms.  The same seed (an int, or a
`random.Random` whose state is then advanced) gives the same image and text.

Seeds in `BENCHMARK_SEEDS` are reserved for the pages of `samples/tob-mini`;
`render_sample` refuses them unless `benchmark=True`, and `training_seeds()`
counts through seeds outside that range, so training never sees a benchmark page.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Literal

from PIL import Image

from ocr_app.config import RegionSplit
from ocr_app.synth import text
from ocr_app.synth.bands import draw_band
from ocr_app.synth.degrade import DEGRADATIONS, degrade
from ocr_app.synth.documents import BUILDERS, KINDS, to_markdown, with_random_words, with_text
from ocr_app.synth.render import (
    A4_RATIO, MONO_FAMILIES, Style, installed_families, random_style, render_blocks, render_line, spelled_for,
)

Level = Literal["word", "line", "block", "page", "band"]
LEVELS: tuple[str, ...] = ("word", "line", "block", "page", "band")
# Far above any counter a training loop reaches, so plain 0, 1, 2, ... never collide.
BENCHMARK_SEEDS = range(2**40, 2**40 + 2**20)
PAGE_WIDTH = 880  # A4 at about 106 dpi
DEGRADATION_WEIGHTS = {"clean": 0.25, "light": 0.35, "scan": 0.3, "heavy": 0.1}
# Where a word or line lies: somewhere on a larger sheet, or as `ocr_app.regions` cuts it from a page.
Placement = Literal["sheet", "band"]


@dataclass(frozen=True)
class Sample:
    image: Image.Image
    markdown: str
    level: str
    kind: str
    degradation: str


def is_benchmark_seed(seed: int) -> bool:
    return seed in BENCHMARK_SEEDS


def check_training_seeds(seeds: Iterable[int]) -> None:
    """Raise ValueError if any seed belongs to the benchmark's reserved range."""
    clashes = [seed for seed in seeds if is_benchmark_seed(seed)]
    if clashes:
        raise ValueError(f"{len(clashes)} training seed(s) are reserved for the benchmark, e.g. {clashes[0]}")


def training_seeds(start: int = 0) -> Iterator[int]:
    """start, start+1, ... skipping the benchmark's reserved range."""
    seed = start
    while True:
        if is_benchmark_seed(seed):
            seed = BENCHMARK_SEEDS.stop
        yield seed
        seed += 1


def make_sample(
    seed: int | random.Random,
    level: str = "page",
    kind: str | None = None,
    degradation: str | None = None,
    benchmark: bool = False,
    random_text: bool = False,
    placement: Placement = "sheet",
    bold: float = 0.0,
    regions: RegionSplit | None = None,
    fonts: float = 0.0,
    lexicon: float = 0.0,
) -> Sample:
    """One synthetic image with its ground truth; `kind` and `degradation` are drawn from the seed when None.

    `random_text`: words, lines, headings, labels and paragraphs are words drawn independently, half of
    them invented (`text.random_words`), instead of the documents' stock phrases; the layout is the same.
    `placement`: the blank margins of a word or line (see `_margins`); `bold`: the share of words and
    lines that start with bold words (see `_bold_words`); `regions`: how a band is cut (the band level only);
    `fonts`: the share of samples set in the type of real documents where installed (`render.DOCUMENT_FAMILIES`,
    at times italic); `lexicon`: the share of random words that are dictionary words, identifiers, amounts and
    dates in their real formats (`text.real_token`).  At 0 (their default) neither draws from `rng`, so the
    samples, the benchmark's pages among them, stay those drawn before them.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown level '{level}' (levels: {', '.join(LEVELS)})")
    if level == "band" and regions is None:
        raise ValueError("the band level needs the RegionSplit that cuts a page into bands")
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind '{kind}' (kinds: {', '.join(KINDS)})")
    if degradation is not None and degradation not in DEGRADATIONS:
        raise ValueError(f"unknown degradation '{degradation}' (degradations: {', '.join(DEGRADATIONS)})")
    if isinstance(seed, int) and is_benchmark_seed(seed) != benchmark:
        raise ValueError(f"seed {seed} is {'not ' if benchmark else ''}in the benchmark's reserved range")
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    kind = kind or rng.choice(KINDS)
    degradation = degradation or rng.choices(list(DEGRADATION_WEIGHTS), weights=list(DEGRADATION_WEIGHTS.values()))[0]
    document_type = fonts > 0 and rng.random() < fonts and bool(installed_families())
    if level in ("word", "line"):
        if level == "word":
            content = text.random_words(rng, 1, lexicon) if random_text else text.word(rng)
        else:
            content = text.random_words(rng, rng.randint(2, 9), lexicon) if random_text else _line(rng)
        families = installed_families() if document_type else ("sans", "serif", "condensed", "mono")
        style = _italic(rng, random_style(rng, families, (12, 36) if level == "word" else (12, 28)), document_type)
        content = spelled_for(style.family, content)
        margins = _margins(rng, placement)
        bold_words = _bold_words(rng, content, bold)
        image = render_line(content, style, bold_words, margins)
        markdown = _emphasized(content, bold_words)
    else:
        blocks = BUILDERS[kind](rng)
        if random_text:
            blocks = with_random_words(blocks, rng, lexicon)
        receipt = kind == "receipt"
        if document_type:
            installed = installed_families()
            families = tuple(family for family in installed if (family in MONO_FAMILIES) == receipt)
        else:
            families = ("mono", "condensed") if receipt else ("sans", "serif", "condensed")
        style = _italic(rng, random_style(rng, families, (12, 15) if receipt else (14, 19)), document_type)
        if document_type:
            blocks = with_text(blocks, lambda written: spelled_for(style.family, written))
        width = rng.randint(380, 460) if receipt else PAGE_WIDTH
        if not benchmark:
            # Headings drawn at one size per level (1.6 times the body's for `#`) were all the reader saw:
            # samples/fatura.pdf's title, 1.85 times its body's height, came out "P RTI" (and read right shrunk).
            style = replace(style, heading_scale=rng.uniform(0.8, 1.5))
        if level == "band":
            start = rng.randrange(len(blocks))
            image, markdown = draw_band(rng, blocks[start : start + rng.randint(1, 3)], style, width, degradation, regions)
            return Sample(image, markdown, level, kind, degradation)
        if level == "block":
            start = rng.randrange(len(blocks))
            blocks = blocks[start : start + rng.randint(1, 3)]
            width = width if receipt else rng.randint(520, PAGE_WIDTH)
            min_height = 0
        else:
            min_height = 0 if receipt else round(width * A4_RATIO)
        image = render_blocks(blocks, style, width, min_height)
        markdown = to_markdown(blocks)
    return Sample(degrade(image, degradation, rng), markdown, level, kind, degradation)


def render_sample(
    seed: int | random.Random,
    level: str = "page",
    kind: str | None = None,
    degradation: str | None = None,
    benchmark: bool = False,
) -> tuple[Image.Image, str]:
    """(RGB image, its exact Markdown); see `make_sample`."""
    sample = make_sample(seed, level, kind, degradation, benchmark)
    return sample.image, sample.markdown


def _margins(rng: random.Random, placement: Placement) -> tuple[int, int, int, int]:
    """Blank margins (left, top, right, bottom) around a word or line.

    "sheet": none for half of them; the others sit somewhere on a larger sheet, as text does in blocks and
    pages, so a reader learns to find the text instead of assuming that it fills the image (one trained on
    tight crops only fails with margins).  "band": up to 24 px on each side, as a page's line looks once
    `ocr_app.regions` has cut it to its ink with a margin; a third of the pixels of "sheet" lines.
    """
    if placement == "band":
        return (rng.randint(0, 24), rng.randint(0, 24), rng.randint(0, 24), rng.randint(0, 24))
    if rng.random() < 0.5:
        return (0, 0, 0, 0)
    return (rng.randint(0, 240), rng.randint(0, 160), rng.randint(0, 240), rng.randint(0, 160))


def _italic(rng: random.Random, style: Style, document_type: bool) -> Style:
    """A tenth of the styles in real documents' type set their regular text in italics (drawn for those only)."""
    return replace(style, italic=True) if document_type and rng.random() < 0.1 else style


def _bold_words(rng: random.Random, content: str, share: float) -> int:
    """How many of a word's or line's first words are bold: for `share` of them 1-3 (a form's label, a
    total's name, a heading), else none.  Nothing is drawn when `share` is 0, so such samples stay as
    they always were."""
    if share == 0 or rng.random() >= share:
        return 0
    return rng.randint(1, min(3, len(content.split(" "))))


def _emphasized(content: str, bold_words: int) -> str:
    """Markdown of a line whose first `bold_words` words are bold, as documents write a label: **Ad:** Ali."""
    if not bold_words:
        return content
    words = content.split(" ")
    return " ".join([f"**{' '.join(words[:bold_words])}**", *words[bold_words:]])


def _line(rng: random.Random) -> str:
    """One line as found on documents: a stretch of prose, a name and address, a date or an amount."""
    choice = rng.random()
    if choice < 0.6:
        words = text.sentence(rng).split()
        count = rng.randint(min(3, len(words)), len(words))
        start = rng.randint(0, len(words) - count)
        return " ".join(words[start : start + count])
    if choice < 0.75:
        return f"{text.person(rng)}, {text.address(rng)}"
    if choice < 0.85:
        return f"{rng.choice(text.CITIES)}, {text.long_date(text.date(rng))}"
    if choice < 0.95:
        return f"{rng.choice(('Ara Toplam', 'KDV', 'Genel Toplam', 'TOPLAM'))}: {text.amount(rng)}"
    return text.company(rng)
