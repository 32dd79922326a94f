"""Real-PDF training data: band answers from the text layer, and the corpus kept apart from every benchmark."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pymupdf
import pytest

from ocr_app.config import PROJECT_ROOT, PixelBudget
from ocr_app.realbench import benchmark_sources, load_manifest
from ocr_app.synth.render import FONTS_DIR
from ocr_app.train_ocr.config import LAYOUT, REAL, load_train_config
from ocr_app.train_ocr.corpus import (
    CORPUS_ROOT,
    EVALUATION_REPOS,
    corpus_pages,
    gate_problems,
    load_corpus,
)
from ocr_app.train_ocr.data import draw_examples, held_out_examples
from ocr_app.train_ocr.textlayer import PAGES_CACHED, LayerWord, _explained, render_and_cut

RECIPE = load_train_config(PROJECT_ROOT / "configs" / "train_ocr.toml")
BUDGET = PixelBudget(min_pixels=RECIPE.model.min_pixels, max_pixels=RECIPE.model.max_pixels)
BENCHMARK = PROJECT_ROOT / "samples" / "real-tr"

# (font file, size in points, words of one line); the last line is a table's row, its cells far apart.
LINES = [
    ("DejaVuSerif.ttf", 11, "Gereğinin yapılmasını saygılarımla arz ederim."),
    ("DejaVuSans-Bold.ttf", 14, "Başvuru Koşulları"),
    ("DejaVuSansMono.ttf", 10, "IBAN: TR33 0006 1005 1978 6457 8413 26"),
    ("DejaVuSans.ttf", 10, "Öğrenci işleri müdürlüğü, Şubat ayında ilan edilen çizelgeyi güncelledi ve kurullara iletti."),
]
ROW = ("DejaVuSans.ttf", 10, ["Sıra", "Ürün adı", "Tutar"])


def _pdf(path: Path) -> list[list[str]]:
    """A one-page PDF with `LINES` and `ROW` in three fonts; the words of each line (the row's per cell)."""
    with pymupdf.open() as document:
        page = document.new_page(width=595, height=842)  # A4
        y = 90
        for font, size, text in LINES:
            page.insert_text((72, y), text, fontsize=size, fontname=Path(font).stem, fontfile=str(FONTS_DIR / font))
            y += 3 * size
        font, size, cells = ROW
        for x, cell in zip((72, 250, 430), cells):
            page.insert_text((x, y), cell, fontsize=size, fontname=Path(font).stem, fontfile=str(FONTS_DIR / font))
        document.save(path)
    return [text.split() for _, _, text in LINES] + [cell.split() for cell in cells]


def test_band_answers_hold_each_word_of_the_band_exactly_once(tmp_path):
    expected = _pdf(tmp_path / "made.pdf")
    # The page rendered at the budget (its chunks' widths, in line heights of 11 rows, fall on the row's cells).
    cut = render_and_cut(tmp_path / "made.pdf", 1, BUDGET, RECIPE.regions.model_copy(update={"page_pixels": None}))
    assert cut.bands == len(LINES) + 1  # every line a band; all of them kept
    by_band: dict[tuple[int, int], Counter] = {}
    for part in cut.parts:
        by_band.setdefault((part.top, part.bottom), Counter()).update(part.text.replace("**", "").split())
    bands = [by_band[rows] for rows in sorted(by_band)]
    assert bands[: len(LINES)] == [Counter(words) for words in expected[: len(LINES)]]
    assert bands[-1] == Counter(word for cell in expected[len(LINES):] for word in cell)
    # The bold line is written bold; the long line is read in chunks, the row cell by cell, none empty.
    assert "**Başvuru Koşulları**" in [part.text for part in cut.parts]
    row_parts = [part.text for part in cut.parts if (part.top, part.bottom) == sorted(by_band)[-1]]
    assert row_parts == [" ".join(words) for words in expected[len(LINES):]]
    assert len([part for part in cut.parts if "Öğrenci" in part.text or "kurullara" in part.text]) >= 2


NOTES = ["Ödeme Koşulu: 20 gün içinde", "Hesap: RRR Bankası", "Not: Yalnız bin lira"]


def test_lines_beside_a_picture_are_answered_line_by_line_with_column_blocks(tmp_path):
    """An address block beside a ring as tall as it (an e-Fatura's logo), which fills the rows between its lines:
    cut into column blocks, each line is a part of its own, answered with its own words; the ring answers
    nothing (no text-layer word explains its ink)."""
    address = ["AAA Anonim Şirketi", "Papatya Caddesi No:21", "34100 Beşiktaş/ İstanbul", "Vergi Dairesi: Büyük"]
    with pymupdf.open() as document:
        page = document.new_page(width=595, height=842)
        for row, line in enumerate(address):
            page.insert_text((60, 80 + 14 * row), line, fontsize=10, fontname="DejaVuSans", fontfile=str(FONTS_DIR / "DejaVuSans.ttf"))
        page.draw_circle((330, 94), 34, color=(0.8, 0.1, 0.1), width=3)
        page.draw_rect(pymupdf.Rect(324, 72, 336, 118), color=(0.8, 0.1, 0.1), fill=(0.8, 0.1, 0.1))
        for row, line in enumerate(NOTES):  # the page's lines, whose median height a band of several exceeds
            page.insert_text((60, 200 + 20 * row), line, fontsize=10, fontname="DejaVuSans", fontfile=str(FONTS_DIR / "DejaVuSans.ttf"))
        document.save(tmp_path / "logo.pdf")
    # A ring `graphic_size` leaves on the page: a picture it does not find (a photo lighter than ink, say).
    split = RECIPE.regions.model_copy(
        update={"page_pixels": None, "rule_cells": False, "column_blocks": False, "graphic_size": None}
    )
    whole = render_and_cut(tmp_path / "logo.pdf", 1, BUDGET, split)
    blocked = render_and_cut(tmp_path / "logo.pdf", 1, BUDGET, split.model_copy(update={"column_blocks": True}))
    assert [part.text for part in whole.parts] == NOTES  # the block and the ring one band: the ring's ink is no word's
    assert [part.text for part in blocked.parts] == address + NOTES
    as_read = render_and_cut(tmp_path / "logo.pdf", 1, BUDGET, RECIPE.regions.model_copy(update={"page_pixels": None}))
    assert [part.text for part in as_read.parts] == address + NOTES  # as the recipe reads it: rule_cells, graphics


def test_parts_of_a_page_rendered_larger_are_cut_from_it_with_the_same_words(tmp_path):
    """With `page_pixels` (the recipe's), a corpus page is cut where its budget-sized page says and each part's
    pixels come from the 200-dpi rendering, as `ocr-read` reads it: the same words in each band, an image
    1.9 times larger to take the parts from, and parts at least the size they had."""
    _pdf(tmp_path / "made.pdf")
    plain = render_and_cut(tmp_path / "made.pdf", 1, BUDGET, RECIPE.regions.model_copy(update={"page_pixels": None}))
    sharp = render_and_cut(tmp_path / "made.pdf", 1, BUDGET, RECIPE.regions)
    assert RECIPE.regions.page_pixels is not None and min(sharp.zoom) > 1.8
    assert (sharp.image.width, sharp.image.height) == (round(plain.image.width * sharp.zoom[0]), round(plain.image.height * sharp.zoom[1]))

    def words(cut):
        return sorted(word for part in cut.parts for word in part.text.replace("**", "").split())

    assert words(sharp) == words(plain)
    assert sharp.scale >= max(plain.scale, min(sharp.zoom))


def test_hidden_text_and_text_without_ink_are_not_kept(tmp_path):
    """A word drawn invisible (render mode 3, as an OCR layer under a scan) explains no ink: its band is dropped."""
    with pymupdf.open() as document:
        page = document.new_page(width=595, height=842)
        regular = str(FONTS_DIR / "DejaVuSans.ttf")
        page.insert_text((72, 90), "Görünen satır burada", fontsize=11, fontname="sans", fontfile=regular)
        page.insert_text((72, 140), "Görünmeyen katman", fontsize=11, fontname="sans", fontfile=regular, render_mode=3)
        page.draw_rect(pymupdf.Rect(72, 180, 200, 200), color=(0, 0, 0), fill=(0, 0, 0))  # ink with no text
        document.save(tmp_path / "hidden.pdf")
    cut = render_and_cut(tmp_path / "hidden.pdf", 1, BUDGET, RECIPE.regions)
    assert [part.text for part in cut.parts] == ["Görünen satır burada"]


def test_a_part_answers_only_for_words_inside_it():
    """Where two lines overlap in one band (a red stamp line over a footer line), a word of one line can reach
    past the edge of a part of the other: that part's image shows only some of the word, so it is not kept."""
    inked = np.zeros(200, dtype=bool)  # [W] the band's ink columns
    inked[20:60] = inked[70:150] = True
    word = LayerWord(left=70, top=0, right=150, bottom=20, text="89BCC867-A59D", bold=False)
    assert _explained(inked, [word], (65, 160), 20)
    assert not _explained(inked, [word], (100, 160), 20)  # the part's edge cuts the word
    assert not _explained(inked, [word], (60, 120), 20)


def _one_page(lines: list[tuple[str, int]]) -> bytes:
    """A one-page PDF of `lines`, each (text, render mode), in DejaVu Sans."""
    with pymupdf.open() as document:
        page = document.new_page(width=595, height=842)
        for row, (text, mode) in enumerate(lines):
            page.insert_text((72, 90 + 20 * row), text, fontsize=11, fontname="sans",
                             fontfile=str(FONTS_DIR / "DejaVuSans.ttf"), render_mode=mode)
        return document.tobytes()


TURKISH_LINE = "Gereğinin yapılmasını saygılarımla arz ederim. İlgi: 12.03.2024 tarihli dilekçeniz (1/2)."


@pytest.mark.parametrize(("lines", "problem"), [
    ([(TURKISH_LINE, 0)], None),
    ([("Kısa", 0)], "no text layer"),
    ([(TURKISH_LINE, 0), ("Görünmeyen katman, taranmış sayfanın altındaki metin", 3)], "invisible text"),
    ([("Please find the attached invoice for the services rendered in March.", 0)], "no Turkish letters"),
    ([("YÜKSEKÖĞRETĠM KURUMLARI DĠSĠPLĠN SORUġTURMASI ESASLARI VE ÖRNEKLERİ", 0)], "outside Turkish text: Ġġ"),
    ([(TURKISH_LINE + " Bas¸vuru ve o¨grenci", 0)], "broken letters"),
])
def test_gate_passes_intact_turkish_text_only(lines, problem):
    problems = gate_problems(_one_page(lines))
    if problem is None:
        assert problems == []
    else:
        assert any(problem in found for found in problems), problems


def test_every_corpus_pdf_passes_the_gate():
    for document in load_corpus():
        assert gate_problems((CORPUS_ROOT / document.file).read_bytes()) == [], document.file
    # Training and evaluation draw parts of every page, held out or not: all of them must fit the page cache.
    assert len(corpus_pages(True)) + len(corpus_pages(False)) <= PAGES_CACHED


def test_training_corpus_comes_from_no_benchmark_or_evaluation_source():
    documents = load_corpus()
    benchmark = benchmark_sources(BENCHMARK)
    # The benchmark's invoices are rendered from XML through a stylesheet: both source files count as the benchmark's.
    rendered = [d.stylesheet for d in load_manifest(BENCHMARK) if d.stylesheet is not None]
    assert rendered and all(benchmark.holds_repo(s.repo) and s.sha256 in benchmark.sha256 for s in rendered)
    for document in documents:
        # A rendered invoice has two sources, its XML and its stylesheet: neither may be the benchmark's or the evaluation's.
        sources = [(document.repo, document.source_sha256)]
        if document.stylesheet is not None:
            sources.append((document.stylesheet.repo, document.stylesheet.sha256))
        for repo, sha256 in sources:
            assert repo.lower() not in EVALUATION_REPOS and not benchmark.holds_repo(repo), document.file
            assert sha256 not in benchmark.sha256, document.file
        assert not benchmark.holds_file(CORPUS_ROOT / document.file), document.file
    assert any(document.stylesheet is not None for document in documents)  # the corpus has rendered invoices
    # The held-out documents are the evaluation's only: no page of theirs is trained on.
    assert {pdf for pdf, _ in corpus_pages(True)}.isdisjoint(pdf for pdf, _ in corpus_pages(False))
    assert any(document.held_out for document in documents)


@pytest.mark.parametrize("level", [REAL, LAYOUT])
def test_real_and_layout_levels_draw_parts_the_same_on_every_draw(level):
    stage = RECIPE.stages[-1].model_copy(update={"levels": {level: 1.0}, "batch_size": 3})
    examples = draw_examples(0, 3, stage, RECIPE.regions, BUDGET)
    assert [example.level for example in examples] == [level] * 3
    assert all(example.text and example.image.height % 32 == 0 for example in examples)
    assert [example.text for example in draw_examples(0, 3, stage, RECIPE.regions, BUDGET)] == [e.text for e in examples]
    held_out = held_out_examples(level, 2, regions=RECIPE.regions, budget=BUDGET)
    assert all(example.text for example in held_out)


def test_recipe_mixes_real_pages_with_band_data_and_evaluates_them():
    stage = RECIPE.stages[-1]
    assert stage.levels.get(REAL, 0) > 0 and stage.levels.get(LAYOUT, 0) > 0 and stage.levels.get("band", 0) > 0
    with pytest.raises(Exception, match="unknown level"):
        RECIPE.stages[-1].model_validate({**stage.model_dump(), "levels": {"reel": 1.0}})
