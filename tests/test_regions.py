"""Regions: pages cut into bands at blank rows only, and read band by band with the same text either way."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pymupdf
import pytest
from PIL import Image, ImageDraw

from ocr_app.config import PixelBudget, RegionSplit, load_model_preset
from ocr_app.documents import open_document
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.pages import DEFAULT_DPI, fit_image, render_pdf_pages
from ocr_app.regions import (
    CHUNK_CUT_FROM, MAX_ENLARGEMENT, SEPARATOR, WORD_GAP, ReadByRegions, band_rows, cell_columns, cell_text,
    deskewed, erase_rules, ink_per_row, ink_rows, inked_columns, joined_text, line_chunks, line_height, line_heights,
    own_ink, page_bands, page_regions, split_page, table_cells, table_row,
)
from ocr_app.realbench import load_real_benchmark
from ocr_app.regions.bands import column_blocks
from ocr_app.regions.graphics import graphic_mask
from ocr_app.regions.ink import INK_CONTRAST, ink_mask, median_level
from ocr_app.regions.reader import PART_END, _SeparatedStream, join_band
from ocr_app.regions.rules import in_long_runs
from ocr_app.regions.tables import walled_cells
from ocr_app.scoring import normalize
from ocr_app.synth import make_sample, training_seeds
from ocr_app.synth.documents import BUILDERS
from ocr_app.synth.render import font, place_blocks, random_style, render_line

SPLIT = RegionSplit()
TOKEN_SIDE = 32  # Qwen3.5's visual token: 16-px patches merged 2x2 (`PixelBudget.factor`)
# Pages here are cut at their own size: none is over this budget.
BUDGET = PixelBudget(min_pixels=TOKEN_SIDE * TOKEN_SIDE, max_pixels=16_000_000, factor=TOKEN_SIDE)


def _synthetic_page(index: int, degradation: str = "clean") -> Image.Image:
    seed = next(training_seeds(index))
    return make_sample(random.Random(seed), "page", kind="letter", degradation=degradation).image


@pytest.mark.parametrize("degradation", ["clean", "scan"])
def test_bands_hold_every_inked_row_and_cuts_cross_no_ink(degradation):
    page = _synthetic_page(3, degradation)
    inked = ink_rows(page)
    rows = band_rows(page, SPLIT)
    assert len(rows) > 1  # a letter page is taller than one band
    covered = np.zeros_like(inked)
    for (top, bottom), (next_top, _) in zip(rows, rows[1:] + [(page.height, page.height)]):
        assert inked[top] and inked[bottom - 1]  # a band starts and ends at ink
        assert not inked[bottom:next_top].any() and next_top - bottom >= SPLIT.min_gap
        covered[top:bottom] = True
    assert (covered | ~inked).all()
    assert all(band.height % TOKEN_SIDE == 0 and band.width == page.width for band in split_page(page, SPLIT, BUDGET))


@pytest.mark.parametrize("angle", [-2.0, 1.2])
def test_a_skewed_page_is_turned_upright_and_cut_into_its_lines_again(angle):
    page = _synthetic_page(3)
    skewed = page.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=page.getpixel((0, 0)))
    lines = RegionSplit(max_height=32, margin=16)  # a band per line, as the shipped model reads
    level = band_rows(page, lines)
    assert len(band_rows(skewed, lines)) < len(level)  # skewed lines run into each other's rows
    upright = deskewed(skewed)
    assert upright.width > page.width  # grown to keep the corners
    assert [bottom - top for top, bottom in band_rows(upright, lines)] == pytest.approx(
        [bottom - top for top, bottom in level], abs=3
    )


def test_a_level_page_is_left_as_it_is():
    page = _synthetic_page(3)
    assert deskewed(page) is page
    blank = Image.new("RGB", (400, 600), (255, 255, 255))
    assert deskewed(blank) is blank


def test_a_band_is_cut_only_where_it_is_too_tall():
    page = _synthetic_page(3)
    for top, bottom in band_rows(page, SPLIT):
        if bottom - top > SPLIT.max_height:  # allowed only with no blank run wide enough inside
            inside = ink_rows(page)[top:bottom]
            assert not any(
                (~inside[i : i + SPLIT.min_gap]).all() for i in range(1, bottom - top - SPLIT.min_gap)
            )
    whole = band_rows(page, RegionSplit(max_height=page.height))
    assert len(whole) == 1


def test_ink_without_blank_rows_stays_one_band_and_blank_pages_are_read_whole():
    page = Image.new("RGB", (800, 1000), (250, 250, 250))
    ImageDraw.Draw(page).rectangle((50, 100, 250, 800), fill=(20, 20, 20))  # a tall picture (not a rule: thick)
    [(top, bottom)] = band_rows(page, SPLIT)
    assert (top, bottom) == (100, 801)
    [band] = split_page(page, SPLIT, BUDGET)
    assert band.size == (800, 800) and 701 + 2 * SPLIT.margin <= 800  # padded to whole visual tokens
    blank = Image.new("RGB", (400, 600), (255, 255, 255))
    assert split_page(blank, SPLIT, BUDGET) == [blank]


def _tight_paragraph(lines: list[str], family: str) -> tuple[Image.Image, list[np.ndarray], list[np.ndarray]]:
    """Lines stacked so close that each line's descenders share rows with the next one's ascenders (no blank
    row between them), each line's body rows on that page (rows holding half its busiest row's ink) and each
    line's own ink on it ([H, W] bool, ink as `regions` sees it on white paper)."""
    style = random_style(random.Random(5), (family,), (22, 22))
    images = [np.asarray(render_line(line, style).convert("L")) for line in lines]
    width = max(image.shape[1] for image in images)
    page = np.full((16 + sum(image.shape[0] for image in images), width + 16), 255, dtype=np.uint8)
    bodies, owns, top = [], [], 8
    for image in images:
        top -= int(np.flatnonzero((image < 128).any(axis=1))[0]) if bodies else 0
        own = np.full_like(page, 255)
        own[top : top + image.shape[0], 8 : 8 + image.shape[1]] = image
        page = np.minimum(page, own)
        owns.append(own < 255 - INK_CONTRAST)
        ink = (own < 128).sum(axis=1)
        bodies.append(np.flatnonzero(ink >= 0.5 * ink.max()))
        inked = np.flatnonzero(ink)
        top = int(inked[-1]) - 1  # the next line's first ink row lies on this one's last two rows
    end = top + 16
    return Image.fromarray(page[:end]).convert("RGB"), bodies, [own[:end] for own in owns]


@pytest.mark.parametrize("family", ["sans", "serif", "condensed", "mono"])
def test_lines_set_without_blank_rows_between_are_cut_between_them(family):
    lines = ["Şoför yağmurda güçlükle ilerledi", "İzmir'de Ağustos ılık geçti", "Gölgeli yoğurt ağzı", "Ülkü ile Gökçe geldi"]
    page, bodies, _ = _tight_paragraph(lines, family)
    split = RegionSplit(max_height=32, cut_between_lines=True)  # under two lines of 22-px type
    assert len(band_rows(page, split.model_copy(update={"cut_between_lines": False}))) == 1
    rows = band_rows(page, split)
    assert len(rows) == len(lines)
    for (top, bottom), body in zip(rows, bodies):
        assert top <= body[0] and body[-1] < bottom  # each band holds one whole line's letters


@pytest.mark.parametrize("family", ["sans", "serif"])
def test_a_band_cut_between_tight_lines_keeps_only_its_own_lines_ink(family):
    lines = ["Şoför yağmurda güçlükle ilerledi", "İzmir'de Ağustos ılık geçti", "Gölgeli yoğurt ağzı", "Ülkü ile Gökçe geldi"]
    page, _, owns = _tight_paragraph(lines, family)
    split = RegionSplit(max_height=32, cut_between_lines=True)
    rows = band_rows(page, split)
    assert len(rows) == len(lines)
    kept = np.asarray(own_ink(page, rows, line_heights(ink_per_row(page), rows), [(0, page.width)] * len(rows)).convert("L")) < 255 - INK_CONTRAST
    before = np.asarray(page.convert("L")) < 255 - INK_CONTRAST
    foreign_before = foreign_after = 0
    for (top, bottom), own in zip(rows, owns):
        mine = own[top:bottom]
        foreign_before += int((before[top:bottom] & ~mine).sum())
        foreign_after += int((kept[top:bottom] & ~mine).sum())
        assert (kept[top:bottom] & mine).sum() >= 0.97 * mine.sum()  # the line's own ink stays
    # Cut between the lines, the bands held the neighbours' tails and accents; what is left of them is where
    # strokes of two lines touch.
    assert foreign_before > 50 and foreign_after <= 0.25 * foreign_before


def _ink_pixels(image: Image.Image) -> int:
    gray = np.asarray(image.convert("L"), dtype=np.int16)
    return int((gray < np.median(gray) - 80).sum())


def test_bands_cut_to_their_ink_columns_lose_no_ink():
    page = _synthetic_page(3)
    split = RegionSplit(max_height=32, margin=8, crop_columns=True)
    rows = band_rows(page, split)
    bands = split_page(page, split, BUDGET)
    assert len(bands) == len(rows) > 5
    for (top, bottom), band in zip(rows, bands):
        assert _ink_pixels(band) == _ink_pixels(page.crop((0, top, page.width, bottom)))
    assert min(band.width for band in bands) < page.width / 2  # a letter's date or signature is a short line


def _line_heights(bands: list[Image.Image]) -> list[int]:
    return [line_height(ink_per_row(band)) for band in bands]


def test_small_type_is_enlarged_to_the_text_height_and_large_type_is_left_alone():
    page = _synthetic_page(3)
    lines = RegionSplit(max_height=32, margin=8)
    natural = float(np.median(_line_heights(split_page(page, lines, BUDGET))))
    target = round(natural * 1.6)
    enlarged = split_page(page, lines.model_copy(update={"text_height": target}), BUDGET)
    # Roughly the target measured again (anti-aliased edges grow with the letters); exactly its scale:
    assert abs(np.median(_line_heights(enlarged)) - target) <= 0.25 * target
    assert all(band.height % TOKEN_SIDE == 0 and band.width == round(page.width * target / natural) for band in enlarged)
    too_far = split_page(page, lines.model_copy(update={"text_height": round(natural * 10)}), BUDGET)
    assert {band.width for band in too_far} == {round(page.width * MAX_ENLARGEMENT)}
    never_shrunk = split_page(page, lines.model_copy(update={"text_height": round(natural / 2)}), BUDGET)
    assert [band.tobytes() for band in never_shrunk] == [band.tobytes() for band in split_page(page, lines, BUDGET)]


def test_reading_by_regions_is_reading_each_band(hf_engine):
    page = _synthetic_page(5)
    bands = split_page(page, SPLIT, BUDGET)
    settings = GenerationSettings(max_tokens=8)
    one_by_one = [hf_engine.read(band, settings) for band in bands]
    engine = ReadByRegions(hf_engine, SPLIT, BUDGET)
    pieces: list[str] = []
    joined = engine.read(page, settings, on_text=pieces.append)
    assert joined.text == SEPARATOR.join(region.text for region in one_by_one) == "".join(pieces)
    ended = [(*region.token_ids, PART_END) if region.metrics.finish_reason == "stop" else region.token_ids for region in one_by_one]
    assert joined.token_ids == tuple(token for ids in ended for token in ids)
    assert joined.metrics.output_tokens == sum(region.metrics.output_tokens for region in one_by_one)
    assert joined.metrics.prompt_tokens == sum(region.metrics.prompt_tokens for region in one_by_one)

    pages = [("a", page), ("b", _synthetic_page(6)), ("c", Image.new("RGB", (200, 200), (255, 255, 255)))]
    in_bulk = dict(engine.read_many(pages, settings, concurrency=4))
    assert sorted(in_bulk) == ["a", "b", "c"]
    for key, image in pages:
        assert in_bulk[key].text == engine.read(image, settings).text


def test_cells_part_at_wide_blank_runs_and_keep_their_margin_short_of_the_gaps_middle():
    inked = np.zeros(100, dtype=bool)
    inked[[10, 11, 14, 15, 40, 41, 90]] = True  # gaps of 2, 24 and 48 blank columns
    assert cell_columns(inked, gap=20, margin=5) == [(5, 21), (35, 47), (85, 96)]
    assert cell_columns(inked, gap=20, margin=15) == [(0, 28), (28, 57), (75, 100)]  # no further than 28, the middle
    assert cell_columns(inked, gap=50, margin=5) == [(5, 96)]
    assert cell_columns(np.zeros(30, dtype=bool), gap=5, margin=5) == [(0, 30)]


TABLE = [("Ürün", "Miktar", "Birim Fiyat", "Tutar"), ("Şeker (kg)", "10", "42,50 TL", "425,00 TL"),
         ("Zeytinyağı (lt)", "", "310,00 TL", "1.240,00 TL")]
PROSE = "Ödemenizi fatura tarihinden itibaren otuz gün içinde yapınız."


def _table_page(family: str) -> Image.Image:
    """A line of prose, a table whose columns are set apart by space alone (no rules, as samples/fatura.pdf's)
    with an empty cell, prose again and a lone line with a wide gap in it, as a signature's."""
    page = Image.new("RGB", (900, 340), (250, 250, 250))
    draw = ImageDraw.Draw(page)
    face = font(family, 18)
    draw.text((30, 30), PROSE, font=face, fill=(20, 20, 20))
    for row, cells in enumerate(TABLE):
        for left, cell in zip((30, 330, 480, 690), cells):
            draw.text((left, 100 + 45 * row), cell, font=face, fill=(20, 20, 20))
    draw.text((30, 260), PROSE, font=face, fill=(20, 20, 20))
    draw.text((30, 300), "Saygılarımızla,", font=face, fill=(20, 20, 20))
    draw.text((600, 300), "Işık Güneş", font=face, fill=(20, 20, 20))
    return page


@pytest.mark.parametrize("family", ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf"])
def test_a_tables_rows_set_apart_by_space_are_cut_into_its_columns_and_prose_is_not(family):
    page = _table_page(family)
    split = RegionSplit(max_height=32, margin=8, crop_columns=True, cell_gap=2.0)
    prose, *rows, more_prose, signature = page_regions(page, split, BUDGET)
    assert len(prose.images) == len(more_prose.images) == len(signature.images) == 1  # a lone line with a gap is no table
    assert [(len(row.images), row.is_table_row) for row in rows] == [(4, True)] * 3
    assert [cell is None for row in rows for cell in row.images] == [text == "" for cells in TABLE for text in cells]
    whole = page_regions(page, split.model_copy(update={"cell_gap": None}), BUDGET)
    assert [len(band.images) for band in whole] == [1] * 6
    for cells, [band] in zip((row.images for row in rows), (band.images for band in whole[1:])):  # the cells hold the row's ink, each of it once
        assert sum(_ink_pixels(cell) for cell in cells if cell is not None) == _ink_pixels(band)
        assert all(cell.height == band.height for cell in cells if cell is not None)


def _columns_inked(width: int, spans: list[tuple[int, int]]) -> np.ndarray:
    inked = np.zeros(width, dtype=bool)
    for left, right in spans:
        inked[left:right] = True
    return inked


def test_tables_stacked_without_a_line_between_keep_their_own_columns():
    """A key/value block right above a table of four columns, as a scan runs an invoice's header into its
    items: every blank column of either is inked in the other, so read as one table they had no cell but the
    whole row."""
    key_value = _columns_inked(900, [(30, 330), (420, 730)])
    item = _columns_inked(900, [(30, 180), (320, 440), (520, 600), (720, 820)])
    item_with_an_empty_cell = _columns_inked(900, [(30, 180), (320, 440), (720, 820)])
    inked = [key_value] * 3 + [item, item_with_an_empty_cell, item]
    split = RegionSplit(crop_columns=True, cell_gap=1.2, margin=8)
    cells = table_cells(inked, [10] * 6, split)
    assert [len(row) for row in cells] == [2] * 3 + [4] * 3
    assert cells[0] == [(22, 338), (412, 738)]
    assert cells[3] == [(22, 188), (312, 448), (512, 608), (712, 828)]
    assert cells[4][2] is None
    assert table_cells(inked[3:], [10] * 3, split) == cells[3:]  # the table as it is alone


def test_lines_whose_cells_lie_apart_from_those_above_are_no_table():
    """A receipt's two item lines, left, over its two totals, right: each pair shares blank columns, but no
    cell of the totals has ink where an item line has."""
    items = _columns_inked(900, [(30, 150), (170, 200), (230, 330)])
    totals = _columns_inked(900, [(500, 600), (640, 700)])
    split = RegionSplit(crop_columns=True, cell_gap=1.2, margin=8)
    assert [len(row) for row in table_cells([items, items, totals, totals], [10] * 4, split)] == [1] * 4
    assert [len(row) for row in table_cells([items] * 3 + [totals] * 3, [10] * 6, split)] == [3] * 3 + [2] * 3


@pytest.mark.parametrize("name", ["gib-yolcu-beraber-fatura", "gib-ticari-fatura"])
def test_a_scanned_invoices_header_and_items_are_cut_into_cells_as_its_pdfs_are(name):
    """The scanned rendering of a real e-Fatura (grey paper, blur, a degree of skew) runs its key/value
    header and its items' table together; its rows are still table rows, with the PDF page's columns."""
    preset = load_model_preset("ocr-tiny-tr")
    pages = {page.id: page for page in load_real_benchmark(categories=("invoice",))}
    rows = {
        rendering: [parts for parts, is_table_row in page_bands(deskewed(pages[f"{rendering}/invoice/{name}/p1"].image(preset.pixels)), preset.regions).parts if is_table_row]
        for rendering in ("born-digital", "scanned")
    }
    assert len(rows["scanned"]) >= len(rows["born-digital"]) - 3
    assert max(map(len, rows["scanned"])) >= max(map(len, rows["born-digital"])) - 3 >= 7


def test_small_type_set_close_is_cut_a_line_a_band():
    """A 9-pt regulation on the shipped budget's page: its lines are 9-12 rows apart, two of them within
    `max_height`, and a band of two lines was read as one, the model inventing words to fill it.  Each band
    now holds one line of the text layer, but where two lines share no light rows (8 of 70; 29 of 48
    before `lines_apart`)."""
    preset = load_model_preset("ocr-tiny-tr")
    pdf = Path("samples/real-tr/legislation/engelliler-danisma-yonetmeligi.pdf")
    (image,) = render_pdf_pages(open_document(pdf), [1], DEFAULT_DPI, preset.pixels)
    rows = page_bands(image, preset.regions).rows
    with pymupdf.open(pdf) as document:
        page = document[0]
        zoom = image.height / page.rect.height
        middles = [(top + bottom) / 2 * zoom for _, top, _, bottom, *_ in page.get_text("words")]
    # A line's words share their middle to a point or two; the next line's lie 11 points lower.
    spreads = [np.ptp(inside) for top, bottom in rows if (inside := [m for m in middles if top <= m < bottom])]
    assert len(spreads) >= 60
    assert sum(spread > 6 * zoom for spread in spreads) <= 10


def _pdf_boxes(page, image: Image.Image, boxes) -> list[tuple[slice, slice]]:
    """Each of `boxes` (PDF points, x0 y0 x1 y1) as rows and columns of `image`, a rendering of `page`."""
    across, down = image.width / page.rect.width, image.height / page.rect.height
    return [(slice(int(y0 * down), int(np.ceil(y1 * down))), slice(int(x0 * across), int(np.ceil(x1 * across))))
            for x0, y0, x1, y1 in boxes]


@pytest.mark.parametrize("name", ["gib-ticari-fatura", "gib-tevkifat-fatura", "earsiv-portal-test-fatura"])
def test_an_invoices_emblem_and_qr_code_are_painted_over_before_the_cut(name):
    """The pictures a real invoice carries (GİB's emblem, a QR code), once cut as bands, were read as invented
    text ("ŞESAŞ5959..."): with `graphic_size` their ink is gone from the page the bands are cut from: a QR
    code's (box and all: erasing its rules broke it into pieces), the emblem's ring and the small letters it
    closes in."""
    preset = load_model_preset("ocr-tiny-tr")
    split = preset.regions  # the shipped folder paints graphics over
    pdf = Path(f"samples/real-tr/invoice/{name}.pdf")
    (image,) = render_pdf_pages(open_document(pdf), [1], DEFAULT_DPI, preset.pixels)
    with pymupdf.open(pdf) as document:
        pictures = _pdf_boxes(document[0], image, [info["bbox"] for info in document[0].get_image_info()])
    assert pictures
    kept, painted = page_bands(image, split.model_copy(update={"graphic_size": None})), page_bands(image, split)
    for box in pictures:
        ink = ink_mask(kept.ruled)[box].sum()
        assert ink_mask(kept.image)[box].sum() > 0.5 * ink and ink_mask(painted.image)[box].sum() <= 0.01 * ink


def test_no_word_of_a_real_pages_text_layer_is_painted_over_as_a_graphic():
    """Every born-digital page of the benchmark with a picture (logos, emblems, QR codes, a seal): what
    `graphic_size` paints over holds no word of the page's text layer.  Not the e-Arşiv portal's test invoice:
    its "İMZASIZ TEST BELGESİ" stamp is text in letters 10 times the page's, set across the words under it."""
    preset = load_model_preset("ocr-tiny-tr")
    split = preset.regions
    pages = 0
    for pdf in sorted(Path("samples/real-tr").glob("*/*.pdf")):
        with pymupdf.open(pdf) as document:
            for number, page in enumerate(document, start=1):
                if not page.get_image_info() or pdf.stem == "earsiv-portal-test-fatura":
                    continue
                (image,) = render_pdf_pages(open_document(pdf), [number], DEFAULT_DPI, preset.pixels)
                ink = ink_mask(page_bands(image, split).ruled)  # [H, W], as `page_bands` finds graphics in
                graphics = graphic_mask(ink, split.graphic_size) & ink  # [H, W]
                pages += bool(graphics.any())
                for box in _pdf_boxes(page, image, [word[:4] for word in page.get_text("words")]):
                    assert graphics[box].sum() <= 0.1 * ink[box].sum(), (pdf.name, number)
    assert pages >= 9


def _sharpness(image: Image.Image) -> float:
    gray = np.asarray(image.convert("L"), dtype=np.float32)
    return float(np.abs(cv2.Laplacian(gray, cv2.CV_32F)).mean())


@pytest.mark.parametrize("page_id", ["born-digital/invoice/gib-ticari-fatura/p1", "scanned/invoice/gib-ticari-fatura/p1",
                                     "born-digital/legislation/engelliler-danisma-yonetmeligi/p1"])
def test_parts_are_taken_from_the_sharper_page_where_the_fitted_page_cuts_it(page_id):
    """A page kept at `page_pixels` is cut where the same page fitted to the model's budget is, into parts of
    the same sizes (type this small is enlarged past the larger page's own size); their pixels come from the
    larger page (twice the detail: 9-pt type is enlarged from its strokes, not their blur), with the rules the
    cut erased erased there too."""
    preset = load_model_preset("ocr-tiny-tr")
    page = next(page for page in load_real_benchmark(categories=(page_id.split("/")[1],)) if page.id == page_id)
    sharp = page.image(preset.page_pixels)
    fitted = fit_image(sharp, preset.pixels)
    assert sharp.width > 1.5 * fitted.width
    parts, fitted_parts = (
        [part for band in page_regions(image, preset.regions, preset.pixels) for part in band.images if part is not None]
        for image in (sharp, fitted)
    )
    assert [part.size for part in parts] == [part.size for part in fitted_parts]
    assert np.mean([_sharpness(part) for part in parts]) > 1.7 * np.mean([_sharpness(part) for part in fitted_parts])
    assert [_ruled(part) for part in parts] == [_ruled(part) for part in fitted_parts]


def test_parts_of_larger_type_are_never_shrunk_below_the_sharper_page():
    """12-pt type is 12 rows high on the fitted page, enlarged 1.6x to the text height, but 23 rows on the
    page rendered at 200 dpi: its parts keep that size rather than lose detail the page has."""
    preset = load_model_preset("ocr-tiny-tr")
    page = next(page for page in load_real_benchmark(categories=("letter",)) if page.id == "born-digital/letter/yok-44b-temel-ilkeler/p1")
    sharp = page.image(preset.page_pixels)
    parts, fitted_parts = (
        [part for band in page_regions(image, preset.regions, preset.pixels) for part in band.images if part is not None]
        for image in (sharp, fit_image(sharp, preset.pixels))
    )
    assert len(parts) == len(fitted_parts)
    assert all(part.width >= fitted.width and part.height >= fitted.height for part, fitted in zip(parts, fitted_parts))
    assert sum(part.width for part in parts) > 1.1 * sum(part.width for part in fitted_parts)


def _ruled(part: Image.Image) -> bool:
    """Whether `part` has a row of ink across 80% of it: a rule (a line of letters has gaps between them)."""
    gray = np.asarray(part.convert("L"), dtype=np.int16)
    return bool((gray < np.median(gray) - INK_CONTRAST).mean(axis=1).max() > 0.8)


def test_a_band_read_cell_by_cell_is_written_as_a_table_row(hf_engine):
    page = _table_page("DejaVuSans.ttf")
    split = RegionSplit(max_height=32, margin=8, crop_columns=True, cell_gap=2.0)
    settings = GenerationSettings(max_tokens=6)
    engine = ReadByRegions(hf_engine, split, BUDGET)
    expected = [
        cells_read[0] if len(cells_read) == 1 else table_row([cell_text(text) for text in cells_read])
        for cells_read in (
            ["" if cell is None else hf_engine.read(cell, settings).text for cell in band.images]
            for band in page_regions(page, split, BUDGET)
        )
    ]
    pieces: list[str] = []
    read = engine.read(page, settings, on_text=pieces.append)
    assert read.text == joined_text(expected) == "".join(pieces)
    assert read.text.count("\n|") >= 3  # the rows, one table: the header's delimiter row and two rows
    [(_, in_bulk)] = list(engine.read_many([("page", page)], settings, concurrency=3))
    assert in_bulk.text == read.text and in_bulk.token_ids == read.token_ids


def test_a_cells_reading_is_written_plain_on_one_line():
    assert cell_text("**Birim Fiyat**") == "Birim Fiyat"
    assert cell_text(" 42,50\nTL | ") == "42,50 TL"


def _ruled_table_page(grid: str) -> tuple[Image.Image, Image.Image]:
    """A document with a table drawn with `grid` rules, and the same drawn without any."""
    rng = random.Random(4)
    blocks = BUILDERS["invoice"](rng)
    style = random_style(rng)
    return tuple(place_blocks(blocks, replace(style, grid=kind), 880)[0] for kind in (grid, "none"))


@pytest.mark.parametrize("grid", ["full", "rules"])
def test_a_tables_rules_are_erased_and_its_rows_cut_into_cells_as_without_them(grid):
    ruled, bare = _ruled_table_page(grid)
    erased = erase_rules(ruled)
    split = RegionSplit(max_height=32, margin=16, crop_columns=True, cut_between_lines=True, text_height=19, cell_gap=1.2)
    rows = [band for band in page_regions(ruled, split, BUDGET) if band.is_table_row]
    bare_rows = [band for band in page_regions(bare, split, BUDGET) if band.is_table_row]
    assert len(rows) == len(bare_rows) >= 3
    assert [len(band.images) for band in rows] == [len(band.images) for band in bare_rows]
    text_ink = _ink_mask(bare)
    assert (_ink_mask(erased) & text_ink).sum() > 0.97 * text_ink.sum()  # the words keep their ink
    assert not (_ink_mask(erased) & ~text_ink).any()  # and no rule's is left


RULED_ROWS = [("Sıra", "Mal Hizmet", "Miktar", "Birim Fiyat"), ("1", "Masa Üstü Bilgisayar", "12 Adet", "825,50 TL"),
              ("2", "Yazıcı", "3 Adet", "121,30 TL")]


def _ruled_rows_page() -> tuple[Image.Image, list[int]]:
    """A line in a box, then a table ruled on every side of every cell, its text 5 px from the rules (columns
    12 px apart, under cell_gap's 1.2 line heights once the rules are erased); and the rules' columns."""
    page = Image.new("RGB", (760, 260), (250, 250, 250))
    draw = ImageDraw.Draw(page)
    face = font("DejaVuSans.ttf", 16)
    draw.rectangle((20, 20, 420, 56), outline=(30, 30, 30))
    draw.text((26, 28), "Fatura No: GIB2009000000011", font=face, fill=(20, 20, 20))
    lefts = [20]
    for texts in zip(*RULED_ROWS):
        lefts.append(lefts[-1] + 12 + max(round(draw.textlength(text, font=face)) for text in texts))
    for row, texts in enumerate(RULED_ROWS):
        top = 90 + 40 * row
        for left, text in zip(lefts, texts):
            draw.text((left + 6, top + 10), text, font=face, fill=(20, 20, 20))
    for row in range(len(RULED_ROWS) + 1):
        draw.line((lefts[0], 90 + 40 * row, lefts[-1], 90 + 40 * row), fill=(30, 30, 30))
    for left in lefts:
        draw.line((left, 90, left, 90 + 40 * len(RULED_ROWS)), fill=(30, 30, 30))
    return page, lefts


def test_a_ruled_tables_rows_are_cut_at_its_vertical_rules_and_a_boxed_line_is_no_table():
    page, lefts = _ruled_rows_page()
    split = RegionSplit(max_height=32, margin=8, crop_columns=True, text_height=19, cell_gap=1.2, rule_cells=True)
    boxed, *rows = page_bands(page, split).parts
    assert boxed == page_bands(page, split.model_copy(update={"rule_cells": False})).parts[0]
    assert not boxed[1] and len(boxed[0]) == 1
    assert [(len(cells), is_row) for cells, is_row in rows] == [(4, True)] * 3
    for cells, _ in rows:  # each cell between its two rules, with its ink
        assert all(left <= cell_left and cell_right <= right for (cell_left, cell_right), left, right in zip(cells, lefts, lefts[1:]))
    unwalled = page_bands(page, split.model_copy(update={"rule_cells": False})).parts[1:]
    assert all(len(cells) < 4 for cells, _ in unwalled)  # the erased rules leave the columns too close to part


def test_walled_cells_are_the_ink_between_walls_from_the_first_inked_cell_to_the_last():
    inked = _columns_inked(100, [(12, 18), (41, 44), (80, 90)])
    assert walled_cells(inked, [5, 30, 50, 70, 95], margin=3) == [(9, 21), (38, 47), None, (77, 93)]
    assert walled_cells(inked, [20, 40], margin=30) == [(0, 20), None, (40, 100)]
    assert walled_cells(_columns_inked(100, [(12, 18), (22, 25)]), [10, 30], margin=3) is None  # one cell: a box


NOTES = ["Ödeme Koşulu: 20 gün içinde", "Hesap: RRR Bankası", "Not: Yalnız bin lira"]
ADDRESS = ["AAA Anonim Şirketi", "Papatya Caddesi No:21", "34100 Beşiktaş/ İstanbul", "Tel: (212) 925 51 51", "VKN: 1288331521"]


def _address_by_a_logo() -> Image.Image:
    """An address block of five lines beside a picture as tall as the block (a ring with a bar in it, as an
    e-Fatura's logo), which fills the rows between the lines; then lines under both."""
    page = Image.new("RGB", (700, 260), (250, 250, 250))
    draw = ImageDraw.Draw(page)
    face = font("DejaVuSans.ttf", 14)
    for row, line in enumerate(ADDRESS):
        draw.text((30, 30 + 24 * row), line, font=face, fill=(20, 20, 20))
    draw.ellipse((420, 22, 540, 142), outline=(200, 30, 30), width=5)
    draw.rectangle((470, 50, 490, 115), fill=(200, 30, 30))
    for row, line in enumerate(NOTES):  # the page's lines, whose median height a band of several exceeds
        draw.text((30, 170 + 24 * row), line, font=face, fill=(20, 20, 20))
    return page


def test_a_block_of_lines_beside_a_picture_is_cut_into_its_lines_with_column_blocks():
    page = _address_by_a_logo()
    split = RegionSplit(max_height=32, margin=8, crop_columns=True, cut_between_lines=True, cell_gap=1.2)
    blocked = page_bands(page, split.model_copy(update={"column_blocks": True}))
    whole = page_bands(page, split)
    assert len(whole.rows) == 1 + len(NOTES) and whole.spans == [(0, page.width)] * len(whole.rows)  # the block and the picture one band
    *lines, picture = list(zip(blocked.rows, blocked.spans))[: -len(NOTES)]
    assert list(zip(blocked.rows, blocked.spans))[-len(NOTES):] == list(zip(whole.rows, whole.spans))[1:]
    assert len(lines) == len(ADDRESS)
    assert [top for (top, _), _ in lines] == sorted(top for (top, _), _ in lines)  # a block's lines top to bottom
    (left_block, right_block) = {span for _, span in lines}, {picture[1]}
    assert len(left_block) == 1 and left_block.pop()[1] == right_block.pop()[0] < 420
    assert all(bottom - top < 24 for (top, bottom), _ in lines) and picture[0][1] - picture[0][0] > 110
    for (top, bottom), (parts, is_table_row), span in zip(blocked.rows, blocked.parts, blocked.spans):
        assert not is_table_row and all(span[0] <= left and right <= span[1] for left, right in parts)


def test_a_seals_ring_and_what_it_closes_in_and_a_qr_code_are_graphics_and_a_boxed_word_is_text():
    """Drawn on a page of 14-px type: a seal (a ring with small letters inside), a QR-like block of random
    modules, and a word in a box drawn round it.  The seal goes with its letters, the block box and all; of
    the boxed word only its box goes, and no line of text loses a pixel."""
    page = _address_by_a_logo()  # a ring with a bar in it beside the address, lines under both
    draw = ImageDraw.Draw(page)
    face = font("DejaVuSans.ttf", 14)
    draw.text((455, 60), "T.C.", font=face, fill=(20, 20, 20))  # inside the ring
    modules = np.random.default_rng(0).random((21, 21)) < 0.5  # [21, 21]: a QR code's modules, 4 px each
    for top, left in ((0, 0), (0, 14), (14, 0)):  # its finder patterns: rings of modules round a 3x3 square
        modules[top : top + 7, left : left + 7] = True
        modules[top + 1 : top + 6, left + 1 : left + 6] = False
        modules[top + 2 : top + 5, left + 2 : left + 5] = True
    for row, column in zip(*np.nonzero(modules)):
        draw.rectangle((580 + 4 * column, 20 + 4 * row, 583 + 4 * column, 23 + 4 * row), fill=(0, 0, 0))
    draw.rectangle((250, 190, 400, 255), outline=(20, 20, 20), width=2)
    draw.text((280, 215), "Rektör", font=face, fill=(20, 20, 20))
    dark = ink_mask(page)  # [H, W]
    graphics = graphic_mask(dark, 5.0)  # [H, W]
    ring, qr_code, boxed = (slice(20, 145), slice(418, 543)), (slice(20, 104), slice(580, 664)), (slice(205, 240), slice(260, 390))
    assert graphics[ring][dark[ring]].all() and graphics[qr_code].all()
    assert graphics[190:192, 250:400].all() and not graphics[boxed][dark[boxed]].any()
    text = dark.copy()  # [H, W]: the address and the lines under it
    for box in (ring, qr_code, (slice(188, 258), slice(248, 403))):
        text[box] = False
    assert text.sum() > 2000 and not graphics[text].any()


def test_column_blocks_reach_to_the_middle_of_the_gaps_wide_enough_between_them():
    inked = _columns_inked(100, [(10, 20), (24, 30), (60, 70)])
    assert column_blocks(inked, 10) == [(0, 45), (45, 100)]
    assert column_blocks(inked, 4) == [(0, 22), (22, 45), (45, 100)]
    assert column_blocks(inked, 31) == [(0, 100)]


def _runs_by_definition(ink: np.ndarray, length: int) -> np.ndarray:
    """`in_long_runs` as its docstring says it, a row and a run at a time."""
    marked = np.zeros_like(ink)
    for y, row in enumerate(ink):
        x = 0
        while x < len(row):
            end = x
            while end < len(row) and row[end]:
                end += 1
            if end - x >= length:
                marked[y, x:end] = True
            x = end + 1
    return marked


def test_long_runs_are_exactly_the_runs_of_at_least_their_length():
    rng = np.random.default_rng(0)
    for _ in range(200):
        height, width = (int(side) for side in rng.integers(1, 40, size=2) * (1, 5))
        ink = rng.random((height, width)) < rng.random()
        length = int(rng.integers(1, width + 1))
        assert (in_long_runs(ink, length) == _runs_by_definition(ink, length)).all()
        down = int(rng.integers(1, height + 1))
        assert (in_long_runs(ink.T, down) == _runs_by_definition(ink.T, down)).all()  # a strided view too


def test_the_median_level_is_numpys_median_truncated():
    rng = np.random.default_rng(1)
    for _ in range(500):
        levels = rng.integers(0, 256, size=int(rng.integers(1, 300))).astype(np.uint8)
        levels = levels // int(rng.integers(1, 80)) * 3  # few distinct levels: ties at the middle
        assert median_level(levels) == int(np.median(levels))


TAILS_AND_ACCENTS = "Şapkalı yaygın gölge, Ödül: Çağ"


def _line_on_a_rule(gap: int) -> tuple[Image.Image, Image.Image]:
    """A line of descenders and accents standing `gap` rows above a rule as wide as the page (a ruled table's
    row), and the same line without the rule."""
    page = Image.new("RGB", (700, 80), (250, 250, 250))
    draw = ImageDraw.Draw(page)
    face = font("DejaVuSerif.ttf", 15)
    draw.text((20, 24), TAILS_AND_ACCENTS, font=face, fill=(20, 20, 20))
    bare = page.copy()
    rule = int(np.flatnonzero(_ink_mask(bare).any(axis=1))[-1]) + gap
    draw.line((10, rule, 690, rule), fill=(30, 30, 30))
    return page, bare


@pytest.mark.parametrize("gap", [1, 2])
def test_a_band_reaches_over_the_tails_that_erasing_a_rule_beside_them_took(gap):
    page, bare = _line_on_a_rule(gap)
    text_rows = np.flatnonzero(_ink_mask(bare).any(axis=1))
    split = RegionSplit(max_height=32, margin=8, crop_columns=True, cut_between_lines=True, text_height=19, rule_cells=True)
    (clipped,) = page_bands(page, split).rows
    assert clipped[1] <= text_rows[-1]  # the rule's erased edge took the tails' last rows with it
    (whole,) = page_bands(page, split.model_copy(update={"faint_edges": True})).rows
    assert whole == (text_rows[0], text_rows[-1] + 1)
    assert page_bands(bare, split.model_copy(update={"faint_edges": True})).rows == [whole]


@pytest.mark.parametrize("family", ["sans", "serif"])
def test_bands_reaching_over_faint_rows_stay_apart_between_tight_lines(family):
    lines = ["Şoför yağmurda güçlükle ilerledi", "İzmir'de Ağustos ılık geçti", "Gölgeli yoğurt ağzı", "Ülkü ile Gökçe geldi"]
    page, bodies, _ = _tight_paragraph(lines, family)
    split = RegionSplit(max_height=32, cut_between_lines=True, faint_edges=True)
    rows = page_bands(page, split).rows
    assert len(rows) == len(lines)
    assert all(bottom <= next_top for (_, bottom), (next_top, _) in zip(rows, rows[1:]))
    assert all(top <= body[0] and body[-1] < bottom for (top, bottom), body in zip(rows, bodies))


def test_a_page_without_rules_is_left_as_it_is():
    page = _synthetic_page(3)
    assert erase_rules(page) is page


def _ink_mask(image: Image.Image) -> np.ndarray:
    gray = np.asarray(image.convert("L"), dtype=np.int16)
    return gray < int(np.median(gray)) - 80


LONG_LINE = "Siparişiniz için teşekkür ederiz. Ürünleriniz 18 Kasım 2026 tarihinde Kadıköy şubemizden gönderilecektir."


def _long_line(family: str) -> tuple[Image.Image, list[tuple[int, int]]]:
    """A page of one long line drawn word by word, and each word's inked columns."""
    page = Image.new("RGB", (1300, 60), (250, 250, 250))
    draw = ImageDraw.Draw(page)
    face = font(family, 18)
    x, words = 20.0, []
    for word in LONG_LINE.split():
        left, _, right, _ = draw.textbbox((x, 20), word, font=face)
        draw.text((x, 20), word, font=face, fill=(20, 20, 20))
        words.append((left, right))
        x += face.getlength(word + " ")
    return page, words


@pytest.mark.parametrize("family", ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf"])
def test_a_long_line_is_cut_into_chunks_at_word_gaps_no_wider_than_its_room(family):
    page, words = _long_line(family)
    split = RegionSplit(max_height=32, margin=8, crop_columns=True, chunk_width=20)
    [(top, bottom)] = band_rows(page, split)
    inked = inked_columns(page, top, bottom)
    height = line_height(ink_per_row(page)[top:bottom])
    columns = (int(np.flatnonzero(inked)[0]) - 8, int(np.flatnonzero(inked)[-1]) + 9)
    chunks = line_chunks(inked, columns, height, split)
    assert len(chunks) >= 3 and chunks[0][0] == columns[0] and chunks[-1][1] == columns[1]
    between_words = [(end + next_start) / 2 for (_, end), (next_start, _) in zip(words, words[1:])]
    for left, right in chunks:  # wider than the room only where no word ends in the room's last part
        assert right - left <= 20 * height or not any(left + CHUNK_CUT_FROM * 20 * height <= cut <= left + 20 * height for cut in between_words)
    for (_, cut), (start, _) in zip(chunks, chunks[1:]):
        assert cut == start and not inked[cut]
        assert any(end <= cut < next_start for (_, end), (next_start, _) in zip(words, words[1:]))  # between words
    assert line_chunks(inked, columns, height, split.model_copy(update={"chunk_width": None})) == [columns]
    assert line_chunks(inked, columns, height, split.model_copy(update={"chunk_width": 200})) == [columns]


def test_a_word_wider_than_the_room_stays_whole():
    inked = np.zeros(300, dtype=bool)
    inked[10:150] = inked[160:200] = inked[210:290] = True  # words of 140, 40 and 80 columns, 10 apart
    split = RegionSplit(crop_columns=True, chunk_width=5)
    assert WORD_GAP * 20 <= 10
    assert line_chunks(inked, (0, 300), 20, split) == [(0, 155), (155, 205), (205, 300)]


def test_a_line_read_in_chunks_is_their_readings_joined_by_spaces(hf_engine):
    page, _ = _long_line("DejaVuSans.ttf")
    split = RegionSplit(max_height=32, margin=8, crop_columns=True, chunk_width=20)
    settings = GenerationSettings(max_tokens=6)
    [band] = page_regions(page, split, BUDGET)
    assert len(band.images) >= 3 and not band.is_table_row
    expected = " ".join(hf_engine.read(chunk, settings).text.strip() for chunk in band.images)
    engine = ReadByRegions(hf_engine, split, BUDGET)
    pieces: list[str] = []
    read = engine.read(page, settings, on_text=pieces.append)
    assert read.text == expected == "".join(pieces)
    [(_, in_bulk)] = list(engine.read_many([("page", page)], settings, concurrency=3))
    assert in_bulk.text == read.text and in_bulk.token_ids == read.token_ids


BANDS_READ = ["# Fatura", "| Ürün | Tutar |", "| Un (kg) | 472,50 TL |", "| Şeker | 425,00 TL |", "", "Toplam: 897,50 TL"]


def test_a_tables_rows_read_as_bands_are_joined_into_one_markdown_table():
    text = joined_text(BANDS_READ)
    assert text == (
        "# Fatura\n\n| Ürün | Tutar |\n| --- | --- |\n| Un (kg) | 472,50 TL |\n| Şeker | 425,00 TL |\n\n\n\nToplam: 897,50 TL"
    )
    reference = "# Fatura\n\n| Ürün | Tutar |\n| --- | ---: |\n| Un (kg) | 472,50 TL |\n| Şeker | 425,00 TL |\n\nToplam: 897,50 TL"
    assert normalize(text) == normalize(reference)
    assert joined_text(["metin", "| a |"]) == "metin" + SEPARATOR + "| a |"  # a row after prose starts a table


def test_streamed_bands_carry_the_same_separators_as_the_joined_text():
    pieces: list[str] = []
    for index, text in enumerate(BANDS_READ):
        stream = _SeparatedStream(pieces.append, BANDS_READ[:index])
        for start in range(0, len(text), 3):  # streamed a few characters at a time, as tokens come
            stream(text[start : start + 3])
        stream.finish()
    assert "".join(pieces) == joined_text(BANDS_READ)


def test_joined_bands_keep_their_top2_gaps_aligned_with_their_tokens():
    from ocr_app.engines.protocol import PageText
    from ocr_app.metrics import PageMetrics
    from ocr_app.regions.reader import join_regions

    # The first band stopped by itself: its last gap is its stop token's, which stands as PART_END in the page's ids.
    stopped = PageText("ab", (1, 2), PageMetrics(5, 3, 1.0, "stop"), top2_gaps=(0.5, 0.6, 0.7))
    cut = PageText("c", (3,), PageMetrics(5, 1, 1.0, "length"), top2_gaps=(0.8,))
    page = join_regions([stopped, cut], 2.0)
    assert page.token_ids == (1, 2, PART_END, 3) and page.top2_gaps == (0.5, 0.6, 0.7, 0.8)
    assert join_regions([stopped, replace(cut, top2_gaps=None)], 2.0).top2_gaps is None
    # A band joined from its chunks already ends with its own PART_END: joined again, it gets no second one.
    band = join_band([stopped, stopped], is_table_row=False)
    assert join_regions([band, stopped], 2.0).token_ids == (1, 2, PART_END, 1, 2, PART_END, 1, 2, PART_END)
    assert len(join_regions([band, stopped], 2.0).top2_gaps) == 9


def test_a_band_ended_early_differs_from_one_read_on_at_the_decision_that_differed():
    """Two readings of a page, one ending its first band after "ab" (a stop token with gap 0.3), the other
    reading on ("abx", its "x" with gap 0.2): the pages' first difference is that decision, with its two gaps,
    not the second band's first token."""
    from ocr_app.engines.protocol import PageText
    from ocr_app.evaluation import gap_at
    from ocr_app.metrics import PageMetrics
    from ocr_app.regions.reader import join_regions

    second = PageText("c", (3,), PageMetrics(5, 1, 1.0, "stop"), top2_gaps=(4.0, 1.0))
    ended = join_regions([PageText("ab", (1, 2), PageMetrics(5, 3, 1.0, "stop"), top2_gaps=(0.5, 0.6, 0.3)), second], 2.0)
    read_on = join_regions([PageText("abx", (1, 2, 9), PageMetrics(5, 4, 1.0, "stop"), top2_gaps=(0.5, 0.6, 0.2, 0.9)), second], 2.0)
    first = next(index for index, (a, b) in enumerate(zip(ended.token_ids, read_on.token_ids)) if a != b)
    assert first == 2 and (gap_at(ended, first), gap_at(read_on, first)) == (0.3, 0.2)


def test_a_band_looping_above_the_last_makes_its_page_a_looping_one():
    """A page read as bands ends with its last band's tokens: a band above it that ran to max tokens in a loop
    (a real petition's blank read as 2 048 dots) must still mark the page for a re-read, and a page whose band
    ran to max tokens without a loop must not be."""
    from ocr_app.engines.protocol import PageText
    from ocr_app.metrics import PageMetrics
    from ocr_app.regions.reader import join_regions
    from ocr_app.repetition import is_degenerate

    dots = PageText("." * 64, (7,) * 64, PageMetrics(5, 64, 1.0, "length"))
    varied = PageText("x", tuple(range(64)), PageMetrics(5, 64, 1.0, "length"))
    last = PageText("ab", (1, 2), PageMetrics(5, 3, 1.0, "stop"))
    assert is_degenerate(join_regions([last, dots, last], 2.0))
    assert is_degenerate(join_regions([join_regions([dots, last], 1.0), last], 2.0))  # a band of chunks
    assert not is_degenerate(join_regions([last, varied, last], 2.0))
    assert not is_degenerate(join_regions([last, last], 2.0))
