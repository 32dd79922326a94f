"""The synthetic generator: deterministic, exact ground truth, Turkish glyphs, seeds kept apart."""

from __future__ import annotations

import random
import re

import numpy as np
import pymupdf
import pytest
from fontTools.ttLib import TTFont

from ocr_app.synth import (
    BENCHMARK_SEEDS,
    KINDS,
    LEVELS,
    check_training_seeds,
    make_sample,
    render_sample,
    training_seeds,
)
from ocr_app.config import RegionSplit
from ocr_app.regions import page_bands
from ocr_app.scoring import plain_text
from ocr_app.synth import lexicon, render, story, text
from ocr_app.synth.bands import TOKEN_SIDE, band_markdown, words_by_band
from ocr_app.synth.documents import BUILDERS, Heading, Paragraph, Table, to_markdown, with_random_words
from ocr_app.synth.render import FONTS_DIR, place_blocks, random_style
from ocr_app.synth.text import SENTENCES, money


# As the shipped model's recipe cuts a page into the bands it reads.
BANDS = RegionSplit(max_height=32, min_gap=4, margin=16, crop_columns=True, cut_between_lines=True, text_height=19)


@pytest.mark.parametrize("level", LEVELS)
def test_same_seed_same_sample_and_different_seeds_differ(level):
    a, b = make_sample(7, level, regions=BANDS), make_sample(7, level, regions=BANDS)
    assert a.markdown == b.markdown and a.image.tobytes() == b.image.tobytes()
    assert a.image.mode == "RGB" and a.markdown.strip()
    others = {make_sample(seed, level, regions=BANDS).markdown for seed in range(8, 14)}
    assert len(others | {a.markdown}) > 3


def test_rng_objects_advance_so_consecutive_samples_differ():
    rng = random.Random(3)
    first, second = render_sample(rng, level="line")[1], render_sample(rng, level="line")[1]
    assert first != second


@pytest.mark.parametrize("kind", KINDS)
def test_pages_have_ink_and_markdown_structure(kind):
    sample = make_sample(11, level="page", kind=kind, degradation="clean")
    pixels = np.asarray(sample.image.convert("L"))
    assert (pixels < 128).mean() > 0.005  # text was drawn
    if kind in ("invoice", "receipt"):
        assert re.search(r"^\| .* \|$", sample.markdown, re.MULTILINE)
    if kind in ("article", "form", "invoice"):
        assert sample.markdown.startswith("# ")


def _amount(text: str) -> int:
    return int(text.replace(".", "").replace(",", ""))


@pytest.mark.parametrize("seed", range(5))
def test_invoice_totals_add_up(seed):
    markdown = make_sample(seed, level="page", kind="invoice", degradation="clean").markdown
    rows = [line.split(" | ") for line in markdown.splitlines() if re.match(r"^\| \d+ \|", line)]
    line_totals = [_amount(row[-1].rstrip(" |")) for row in rows]
    subtotal = _amount(re.search(r"Ara Toplam:\*\* ([\d.,]+) TL", markdown).group(1))
    taxes = [_amount(value) for value in re.findall(r"KDV \(%\d+\):\*\* ([\d.,]+) TL", markdown)]
    total = _amount(re.search(r"Genel Toplam:\*\* ([\d.,]+) TL", markdown).group(1))
    assert sum(line_totals) == subtotal and subtotal + sum(taxes) == total


def test_money_uses_turkish_separators():
    assert money(123456789) == "1.234.567,89" and money(5) == "0,05"


def test_bundled_fonts_cover_turkish_letters():
    fonts = sorted(FONTS_DIR.glob("*.ttf"))
    assert fonts and (FONTS_DIR / "LICENSE-DejaVu.txt").exists()
    for path in fonts:
        cmap = TTFont(path)["cmap"].getBestCmap()
        assert all(ord(char) in cmap for char in "çğıİöşüÇĞÖŞÜâî"), path.name


def test_benchmark_seeds_are_reserved():
    reserved = BENCHMARK_SEEDS[0]
    with pytest.raises(ValueError):
        render_sample(reserved, level="word")
    with pytest.raises(ValueError):
        render_sample(5, level="word", benchmark=True)
    assert render_sample(reserved, level="word", benchmark=True)[1]
    with pytest.raises(ValueError):
        check_training_seeds([1, 2, reserved + 5])
    seeds = training_seeds(BENCHMARK_SEEDS.start - 1)
    assert [next(seeds) for _ in range(2)] == [BENCHMARK_SEEDS.start - 1, BENCHMARK_SEEDS.stop]
    check_training_seeds(range(100_000))


def test_bad_arguments_are_refused():
    for kwargs in ({"level": "chapter"}, {"kind": "poem"}, {"degradation": "burnt"}, {"level": "band"}):
        with pytest.raises(ValueError):
            render_sample(1, **kwargs)


def test_words_and_lines_are_both_tightly_cropped_and_placed_on_a_larger_sheet():
    """Half sit on a larger sheet, so a reader cannot learn that text always fills the image."""
    height_shares = []
    for seed in range(40):
        sample = make_sample(seed, level="line", degradation="clean")
        ink_rows = np.flatnonzero((np.asarray(sample.image.convert("L")) < 128).any(axis=1))
        assert ink_rows.size, seed
        height_shares.append((ink_rows[-1] - ink_rows[0] + 1) / sample.image.height)
    tight = sum(share > 0.45 for share in height_shares)
    placed = sum(share < 0.3 for share in height_shares)
    assert tight >= 10 and placed >= 10, height_shares


def test_band_placement_keeps_lines_as_tight_as_a_page_band():
    """As `ocr_app.regions` cuts a line from a page: its ink with a few rows and columns of paper around."""
    for seed in range(20):
        sample = make_sample(seed, level="line", degradation="clean", placement="band")
        ink = np.asarray(sample.image.convert("L")) < 128
        rows, columns = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
        blank_above, blank_below = rows[0], sample.image.height - 1 - rows[-1]
        blank_left, blank_right = columns[0], sample.image.width - 1 - columns[-1]
        # render_line's own padding (a third and a half of the type size, plus 2) and at most 24 px more
        assert max(blank_above, blank_below) <= 36 and max(blank_left, blank_right) <= 44, seed


def test_bold_lines_start_with_bold_words_marked_as_in_documents():
    heavier = 0
    for seed in range(30):
        bold = make_sample(seed, level="line", degradation="clean", random_text=True, placement="band", bold=1.0)
        plain = make_sample(seed, level="line", degradation="clean", random_text=True, placement="band")
        assert bold.markdown.startswith("**") and bold.markdown.count("**") == 2
        assert bold.markdown.replace("**", "") == plain.markdown  # same words, same style and margins
        ink = [int((np.asarray(sample.image.convert("L")) < 128).sum()) for sample in (bold, plain)]
        heavier += ink[0] > ink[1]
    assert heavier >= 20  # the monospaced family has no bold face


def test_random_text_keeps_the_layout_but_draws_every_word_independently():
    """Training pages whose words cannot be recited: same blocks and markup, none of the stock sentences."""
    stock = make_sample(11, level="page", kind="letter", degradation="clean")
    random_words = make_sample(11, level="page", kind="letter", degradation="clean", random_text=True)
    stock_blocks, random_blocks = stock.markdown.split("\n\n"), random_words.markdown.split("\n\n")
    assert len(stock_blocks) == len(random_blocks)
    for before, after in zip(stock_blocks, random_blocks):
        assert [before.startswith(mark) for mark in ("#", "**", "|")] == [after.startswith(mark) for mark in ("#", "**", "|")]
    assert not any(sentence in random_words.markdown for sentence in SENTENCES)
    assert any(sentence in stock.markdown for sentence in SENTENCES)
    lines = {make_sample(seed, level="line", random_text=True).markdown for seed in range(20)}
    assert len(lines) == 20 and not any(line in " ".join(SENTENCES) for line in lines)


def test_random_tables_draw_their_cells_anew_keeping_numbers_numbers_and_capitals_capitals():
    """Listed products and stock headers in every table let a reader recite cells instead of reading them."""
    rng = random.Random(5)
    stock = BUILDERS["invoice"](rng)
    drawn = with_random_words(stock, rng)
    stock_table, drawn_table = (next(block for block in blocks if isinstance(block, Table)) for blocks in (stock, drawn))
    assert len(drawn_table.rows) == len(stock_table.rows) and drawn_table.numeric == stock_table.numeric
    assert not set(drawn_table.header) & set(stock_table.header)
    for stock_row, drawn_row in zip(stock_table.rows, drawn_table.rows):
        for before, after, is_number in zip(stock_row, drawn_row, stock_table.numeric):
            assert before != after or is_number
            if is_number:
                assert re.fullmatch(r"%?[\d.,]+( TL| ₺| [^\d\s]+)?", after), after
    capitals = 0
    for kind in ("invoice", "receipt"):
        stock = BUILDERS[kind](rng)
        for before, after in zip(stock, with_random_words(stock, rng)):
            for field in ("text", "label"):
                if isinstance(before, (Heading, Paragraph)) and getattr(before, field, "").isupper():
                    capitals += 1
                    assert getattr(after, field).isupper(), getattr(after, field)
    assert capitals >= 3  # a receipt's labels and shop name


def test_amounts_are_of_every_size_and_at_times_carry_their_currency():
    """Uniform amounts were nearly all five digits of lira, and the model wrote that shape over short prices."""
    rng = random.Random(0)
    amounts = [text.amount(rng) for _ in range(2000)]
    lira = [int(amount.split(",")[0].replace(".", "")) for amount in amounts]
    assert sum(value < 100 for value in lira) > 0.3 * len(lira)
    assert sum(value >= 10_000 for value in lira) > 0.1 * len(lira)
    assert 0.2 < sum(amount.endswith(" TL") for amount in amounts) / len(amounts) < 0.4
    assert any(amount.endswith(" ₺") for amount in amounts)


def test_half_the_random_words_are_in_no_list_and_invented_ones_keep_vowel_harmony():
    """A reader trained on a closed vocabulary learns word shapes; invented words make it read letters."""
    known = set(text.WORDS + text.FIRST_NAMES + text.LAST_NAMES + text.CITIES + text.DISTRICTS)
    tokens = text.random_words(random.Random(0), 2000).split()
    unknown = [token for token in tokens if token not in known and not re.fullmatch(r"[\d.,]+", token)]
    assert 0.4 < len(unknown) / len(tokens) < 0.6
    rng = random.Random(1)
    for _ in range(200):
        lowered = text.invented_word(rng).translate(str.maketrans({"I": "ı", "İ": "i"})).lower()
        vowels = {letter for letter in lowered if letter in text.BACK_VOWELS + text.FRONT_VOWELS}
        assert vowels and (vowels <= set(text.BACK_VOWELS) or vowels <= set(text.FRONT_VOWELS))
    words = {make_sample(seed, level="word", random_text=True).markdown for seed in range(40)}
    assert words - known


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("random_text", [False, True])
def test_a_documents_bands_hold_all_its_words_once_each_written_as_in_its_markdown(kind, random_text):
    rng = random.Random(3)
    blocks = BUILDERS[kind](rng)
    blocks = with_random_words(blocks, rng) if random_text else blocks
    page, placed = place_blocks(blocks, random_style(rng), 880)
    bands = page_bands(page, BANDS)
    words_in = words_by_band(bands.rows, bands.spans, placed)
    assert sum(len(words) for words in words_in) == len(placed)
    markdowns = [band_markdown(blocks, words) for words in words_in if words]
    assert sorted(plain_text("\n".join(markdowns)).split()) == sorted(plain_text(to_markdown(blocks)).split())
    tables = [block for block in blocks if isinstance(block, Table)]
    for markdown in markdowns:
        if markdown.startswith("|"):  # a table's row: every cell there, empty or not
            assert all(line.count("|") == len(tables[0].header) + 1 for line in markdown.splitlines())


def test_band_samples_are_cut_as_a_page_is_read():
    samples = [make_sample(seed, "band", random_text=True, regions=BANDS) for seed in range(40)]
    assert all(sample.image.height % TOKEN_SIDE == 0 for sample in samples)
    assert any(sample.markdown.startswith("| ") for sample in samples)  # table rows
    assert any(sample.markdown.startswith("#") for sample in samples)  # headings
    assert any(sample.markdown.startswith("**") for sample in samples)  # bold labels


def test_band_samples_of_a_table_cut_into_cells_are_single_cells_written_plain():
    cells = BANDS.model_copy(update={"cell_gap": 1.2})
    samples = [make_sample(seed, "band", kind="invoice", random_text=True, regions=cells) for seed in range(60)]
    whole = [make_sample(seed, "band", kind="invoice", random_text=True, regions=BANDS) for seed in range(60)]
    assert all(sample.image.height % TOKEN_SIDE == 0 for sample in samples)
    cut = [(sample, band) for sample, band in zip(samples, whole) if sample.markdown != band.markdown]
    assert cut  # some tables' rows, set apart by space alone, are read cell by cell
    for sample, band in cut:
        assert band.markdown.startswith("| ") and "|" not in sample.markdown and "**" not in sample.markdown
        assert sample.image.width < band.image.width
        assert set(plain_text(sample.markdown).split()) <= set(plain_text(band.markdown).split())


def test_training_pages_draw_headings_at_several_sizes_and_benchmark_pages_at_one():
    """One heading size per level was all a reader saw, and larger titles were misread."""

    def title_rows(seed: int, benchmark: bool) -> int:
        """Rows of the first run of inked rows taller than a rule: a form's title."""
        sample = make_sample(seed, level="page", kind="form", degradation="clean", benchmark=benchmark)
        inked = np.flatnonzero((np.asarray(sample.image.convert("L")) < 128).any(axis=1))
        runs = np.split(inked, np.flatnonzero(np.diff(inked) > 1) + 1)
        return next(len(run) for run in runs if len(run) > 8)

    training = [title_rows(seed, benchmark=False) for seed in range(20)]
    benchmark = [title_rows(seed, benchmark=True) for seed in BENCHMARK_SEEDS[:20]]
    assert max(training) >= max(benchmark) + 5, (training, benchmark)


def test_band_samples_of_long_lines_are_chunks_of_them_as_reading_cuts_them():
    """Training sees what `ocr-read` reads: a long line's chunk, its words a stretch of the line's."""
    chunked_split = BANDS.model_copy(update={"chunk_width": 12.0})
    shorter = 0
    for seed in range(40):
        whole = make_sample(seed, level="band", kind="letter", degradation="clean", regions=BANDS)
        chunk = make_sample(seed, level="band", kind="letter", degradation="clean", regions=chunked_split)
        whole_words, chunk_words = plain_text(whole.markdown).split(), plain_text(chunk.markdown).split()
        assert any(whole_words[start : start + len(chunk_words)] == chunk_words for start in range(len(whole_words)))
        shorter += len(chunk_words) < len(whole_words)
    assert shorter >= 10


def _iban_valid(number: str) -> bool:
    """ISO 13616: the country and check digits moved to the end, letters as 10..35, the number mod 97 is 1."""
    compact = number.replace(" ", "")
    moved = compact[4:] + compact[:4]
    return len(compact) == 26 and compact[:2] == "TR" and int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _tckn_valid(number: str) -> bool:
    d = [int(c) for c in number]
    return (len(d) == 11 and d[0] != 0 and (7 * sum(d[0:9:2]) - sum(d[1:8:2])) % 10 == d[9]
            and sum(d[:10]) % 10 == d[10])


def _vkn_valid(number: str) -> bool:
    total = 0
    for index, digit in enumerate(int(c) for c in number[:9]):
        shifted = (digit + 10 - (index + 1)) % 10
        weighted = shifted * 2 ** (10 - (index + 1)) % 9
        total += 9 if shifted and not weighted else weighted
    return len(number) == 10 and (10 - total % 10) % 10 == int(number[9])


def test_identifiers_carry_valid_check_digits():
    rng = random.Random(4)
    for _ in range(300):
        assert _iban_valid(text.iban(rng))
        assert _tckn_valid(text.tckn(rng))
        assert _vkn_valid(text.vkn(rng))
    assert not _tckn_valid("10000000147") and _tckn_valid("10000000146")  # the checkers themselves tell them apart
    assert _iban_valid("TR33 0006 1005 1978 6457 8413 26") and not _iban_valid("TR34 0006 1005 1978 6457 8413 26")
    assert re.fullmatch(r"[A-Z0-9]{3}20\d\d\d{9}", text.invoice_number(rng))
    assert re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}", text.ettn(rng))


def test_real_tokens_are_dictionary_words_with_suffixes_and_formats():
    words = lexicon.dictionary_words()
    assert len(words) == lexicon.WORDS_SHIPPED and all(" " not in word for word in words[:1000])
    tokens = [text.real_token(random.Random(seed)) for seed in range(400)]
    assert sum(token in words for token in tokens) > 200
    assert any(token.endswith(("TL", "₺", "TRY", "EUR")) or token.startswith(("USD", "$", "€", "₺")) for token in tokens)
    marked = [text.punctuated(random.Random(seed)) for seed in range(400)]
    amendments = [token for token in marked if token.startswith(tuple(f"({kind}:" for kind in text.AMENDMENTS))]
    assert amendments and all(re.fullmatch(r"\([^:]+: ?\d{1,2}/\d{1,2}/\d{4}-\d{4}/\d{1,3} md\.\)", token) for token in amendments)
    assert any(token.startswith("“") and token.rstrip(",.").endswith("”") for token in marked)
    assert any("’" in token for token in marked) and any(token.startswith("E-") for token in marked)
    assert sum(any(mark in token for mark in "()“”‘’';%[") for token in tokens) > 15  # about a tenth of real tokens
    # Blanks come in many lengths, so that a reader counts the dots rather than writing the run it knows.
    blanks = {token for token in marked if re.fullmatch(r"[._…]+", token)}
    assert len({len(token) for token in blanks}) > 10
    # A dictionary word is a stem with its suffixes: far longer on average than the stems' lists.
    assert sum(map(len, words)) / len(words) > 9


def test_document_fonts_only_where_asked_and_installed():
    plain = make_sample(7, "line", random_text=True)
    assert make_sample(7, "line", random_text=True, fonts=0.0, lexicon=0.0).markdown == plain.markdown
    families = render.installed_families()
    if not families:
        pytest.skip("no document fonts installed (make train-setup)")
    styled = [make_sample(seed, "page", random_text=True, fonts=1.0, lexicon=0.5) for seed in range(4)]
    assert all(sample.image.size[0] > 0 for sample in styled)
    for family in families:
        for bold in (False, True):
            face = render.Style(family, 18, (0, 0, 0), (255, 255, 255), 40, "none").font(bold=bold)
            unknown = bytes(face.getmask("\uffff"))  # what a character without a glyph draws
            assert all(bytes(face.getmask(letter)) != unknown for letter in "çğıöşüÇĞİÖŞÜâî"), family
        assert "₺" not in render.spelled_for(family, "42,50 ₺") or "₺" not in render.missing_characters(family)


def test_story_petitions_leave_blanks_that_their_text_layer_keeps():
    """A petition laid out by Story keeps its blanks in the PDF's text layer, the training answer of its parts:
    the dots and underlines the reader must count, of several lengths."""
    for seed in range(40):
        with pymupdf.open(stream=story.document(random.Random(seed))) as pdf:
            layer = "\n".join(page.get_text() for page in pdf)
        if "İmza:" in layer:
            break
    else:
        pytest.fail("no petition among 40 story documents")
    blanks = re.findall(r"\.{3,}|_{3,}", layer)
    assert len({len(blank) for blank in blanks}) >= 3, blanks
