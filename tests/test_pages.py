"""Pages: the resolution policy, image normalisation, lazy rendering and prefetch."""

from __future__ import annotations

import threading
import time
import tracemalloc

import numpy as np
import pymupdf
import pytest
from PIL import Image

from ocr_app.config import PixelBudget
from ocr_app.documents import open_document
from ocr_app.pages import fit_to_budget, iter_pages, prefetch, to_rgb

from .conftest import SAMPLE_PDF

BUDGET = PixelBudget(min_pixels=64 * 64, max_pixels=512 * 512)


@pytest.mark.parametrize("width", [1, 17, 31, 32, 100, 640, 1700, 5000, 20000])
@pytest.mark.parametrize("height", [1, 33, 200, 800, 2200, 9000])
def test_fit_to_budget_snaps_and_respects_budget(width, height):
    new_w, new_h = fit_to_budget(width, height, BUDGET)
    assert new_w % 32 == 0 and new_h % 32 == 0
    assert new_w * new_h <= BUDGET.max_pixels
    # Extreme aspect ratios may not reach min_pixels at 32-px granularity without
    # exceeding max on the other side; every realistic page does.
    if 1 / 8 <= width / height <= 8:
        assert new_w * new_h >= BUDGET.min_pixels


def test_fit_to_budget_keeps_aspect_and_leaves_fitting_sizes_alone():
    assert fit_to_budget(256, 128, BUDGET) == (256, 128)
    new_w, new_h = fit_to_budget(1654, 2339, BUDGET)  # A4 at 200 dpi
    assert abs(new_w / new_h - 1654 / 2339) < 0.05


def test_pdf_pages_render_in_budget():
    document = open_document(SAMPLE_PDF)
    pages = list(iter_pages(document, [2, 1], BUDGET, dpi=100))
    assert [page.number for page in pages] == [2, 1]
    for page in pages:
        assert page.image.mode == "RGB"
        assert page.image.width % 32 == 0 and page.image.height % 32 == 0
        assert page.image.width * page.image.height <= BUDGET.max_pixels


def test_multipage_tiff(tmp_path):
    path = tmp_path / "tarama.tiff"
    frames = [Image.new("L", (200, 100), shade) for shade in (0, 128, 255)]
    frames[0].save(path, save_all=True, append_images=frames[1:])
    document = open_document(path)
    assert document.page_count == 3
    shades = [page.image.getpixel((50, 50))[0] for page in iter_pages(document, [1, 2, 3], BUDGET)]
    assert shades[0] < 20 and 100 < shades[1] < 160 and shades[2] > 235


def test_gif_reads_first_frame_only(tmp_path):
    path = tmp_path / "hareketli.gif"
    frames = [Image.new("P", (64, 64), color) for color in (1, 2, 3)]
    frames[0].save(path, save_all=True, append_images=frames[1:])
    assert open_document(path).page_count == 1


def test_exif_rotation_is_applied(tmp_path):
    path = tmp_path / "telefon.jpg"
    image = Image.new("RGB", (300, 100), "white")
    image.paste((0, 0, 0), (0, 0, 30, 100))  # a dark band on the left edge
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    image.save(path, exif=exif)
    page = next(iter_pages(open_document(path), [1], PixelBudget(min_pixels=1024, max_pixels=10**6)))
    assert page.image.height > page.image.width  # the portrait the camera meant
    top_row = np.asarray(page.image)[:8].mean()
    assert top_row < 100  # the left band is now on top


def test_alpha_is_flattened_onto_white():
    rgba = Image.new("RGBA", (4, 4), (255, 0, 0, 0))
    assert to_rgb(rgba).getpixel((0, 0)) == (255, 255, 255)
    assert to_rgb(Image.new("LA", (4, 4), (0, 255))).getpixel((0, 0)) == (0, 0, 0)


def test_cmyk_palette_and_16_bit_become_8_bit_rgb():
    assert to_rgb(Image.new("CMYK", (4, 4), (0, 0, 0, 0))).getpixel((0, 0)) == (255, 255, 255)
    palette = Image.new("P", (4, 4), 0)
    palette.putpalette([10, 20, 30] * 256)
    assert to_rgb(palette).getpixel((0, 0)) == (10, 20, 30)
    sixteen = Image.fromarray(np.full((4, 4), 65535 // 2, dtype=np.uint16))
    assert to_rgb(sixteen).getpixel((0, 0))[0] in (127, 128)


def test_pages_are_rendered_lazily(tmp_path):
    path = tmp_path / "uzun.pdf"
    doc = pymupdf.open()
    for number in range(200):
        doc.new_page().insert_text((72, 72), f"Sayfa {number}")
    doc.save(path)
    document = open_document(path)
    budget = PixelBudget(min_pixels=1024, max_pixels=1024 * 1024)
    tracemalloc.start()
    for page in iter_pages(document, list(range(1, 201)), budget, dpi=150):
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # One rendered page at 150 dpi is ~6 MB; all 200 held at once would be >1 GB.
    assert peak < 100 * 1024 * 1024


def test_prefetch_keeps_order_and_runs_ahead():
    produced = []

    def items():
        for index in range(10):
            produced.append(index)
            yield index

    iterator = prefetch(items(), depth=3)
    assert next(iterator) == 0
    time.sleep(0.2)
    assert len(produced) >= 3  # rendered ahead while the consumer was busy
    assert list(iterator) == list(range(1, 10))


def test_prefetch_reraises_producer_errors_in_order():
    def items():
        yield 1
        raise ValueError("kötü sayfa")

    iterator = prefetch(items())
    assert next(iterator) == 1
    with pytest.raises(ValueError, match="kötü sayfa"):
        next(iterator)


def test_prefetch_stops_producer_when_consumer_leaves():
    produced = []

    def items():
        for index in range(1000):
            produced.append(index)
            yield index

    iterator = prefetch(items(), depth=2)
    next(iterator)
    iterator.close()
    time.sleep(0.3)
    count = len(produced)
    time.sleep(0.3)
    assert len(produced) == count < 10
    assert not any(t.name == "page-prefetch" and t.is_alive() for t in threading.enumerate())
