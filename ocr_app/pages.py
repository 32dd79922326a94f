"""Pages: turn a document into RGB page images the vision encoder can take.

PDF pages are rendered at a DPI (default 200); images are decoded with their
EXIF orientation applied, alpha flattened onto white, and CMYK, palette and
16-bit modes converted to 8-bit RGB.  Every page is then fitted into the model's
pixel budget with both sides a multiple of 32 px.  Pages are produced lazily,
one at a time, and `prefetch` renders them ahead of the engine on a thread.
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import pymupdf
from PIL import Image, ImageOps

from ocr_app.config import PixelBudget
from ocr_app.documents import MAX_IMAGE_PIXELS, Document
from ocr_app.errors import InputError

DEFAULT_DPI = 200
T = TypeVar("T")


@dataclass(frozen=True)
class Page:
    document: Document
    number: int  # 1-based
    image: Image.Image = field(repr=False)


def fit_to_budget(width: int, height: int, budget: PixelBudget) -> tuple[int, int]:
    """The (width, height) closest to the original aspect with sides multiples of
    `budget.factor` and width*height within [min_pixels, max_pixels].

    Sizes inside the budget are rounded to the grid; larger ones are scaled down
    and floored, smaller ones scaled up and ceiled, so rounding never leaves the
    budget.  Only absurd aspect ratios (a 20000x1 strip) can end below min_pixels.
    """
    factor = budget.factor
    area = width * height

    def snap(scale: float, to_grid) -> tuple[int, int]:
        return (
            max(factor, to_grid(width * scale / factor) * factor),
            max(factor, to_grid(height * scale / factor) * factor),
        )

    new_w, new_h = snap(1.0, round)
    if new_w * new_h > budget.max_pixels:
        new_w, new_h = snap(math.sqrt(budget.max_pixels / area), math.floor)
    elif new_w * new_h < budget.min_pixels:
        new_w, new_h = snap(math.sqrt(budget.min_pixels / area), math.ceil)
    if new_w * new_h > budget.max_pixels:  # the factor-sized floor on a thin side can overshoot
        if new_w >= new_h:
            new_w = max(factor, budget.max_pixels // new_h // factor * factor)
        else:
            new_h = max(factor, budget.max_pixels // new_w // factor * factor)
    return new_w, new_h


def to_rgb(image: Image.Image) -> Image.Image:
    """8-bit RGB with alpha flattened onto white; 16-bit and CMYK handled."""
    if image.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        array = np.asarray(image, dtype=np.uint32)
        peak = 65535 if image.mode.startswith("I;16") else max(int(array.max()), 1)
        image = Image.fromarray((array * 255 // peak).astype(np.uint8), mode="L")
    if image.mode == "P":
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "RGBa"):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB") if image.mode != "RGB" else image


def fit_image(image: Image.Image, budget: PixelBudget) -> Image.Image:
    size = fit_to_budget(*image.size, budget)
    return image if image.size == size else image.resize(size, Image.Resampling.LANCZOS)


def render_pdf_pages(
    document: Document, numbers: list[int], dpi: int, budget: PixelBudget | None = None
) -> Iterator[Image.Image]:
    """Render pages at `dpi`; with a budget, straight to the fitted size.

    PDF pages are vector: rendering directly at the budget's size (x and y
    zoom set apart, a <2% aspect change at most) costs a fraction of rendering
    at full DPI and resampling, and is as sharp.
    """
    with pymupdf.open(document.path) as pdf:
        if document.password is not None:
            pdf.authenticate(document.password)
        for number in numbers:
            try:
                page = pdf.load_page(number - 1)
                width, height = page.rect.width * dpi / 72, page.rect.height * dpi / 72
                if width * height > MAX_IMAGE_PIXELS:  # a poster-sized page: render smaller, never refuse
                    shrink = math.sqrt(MAX_IMAGE_PIXELS / (width * height))
                    width, height = width * shrink, height * shrink
                if budget is not None:
                    width, height = fit_to_budget(round(width), round(height), budget)
                matrix = pymupdf.Matrix(width / page.rect.width, height / page.rect.height)
                pixmap = page.get_pixmap(matrix=matrix, colorspace=pymupdf.csRGB, alpha=False)
            except (RuntimeError, ValueError) as exc:
                raise InputError(f"{document.path}: page {number} cannot be rendered ({exc})") from None
            yield Image.frombytes("RGB", (pixmap.width, pixmap.height), pixmap.samples)


def decode_image_pages(document: Document, numbers: list[int]) -> Iterator[Image.Image]:
    with Image.open(document.path) as image:
        for number in numbers:
            image.seek(number - 1)
            try:
                frame = ImageOps.exif_transpose(image)
                yield to_rgb(frame)
            except (OSError, SyntaxError) as exc:
                raise InputError(f"{document.path}: page {number} cannot be decoded ({exc})") from None


def iter_pages(document: Document, numbers: list[int], budget: PixelBudget, dpi: int = DEFAULT_DPI) -> Iterator[Page]:
    """Render the given 1-based pages one at a time, fitted to the budget."""
    if document.kind == "pdf":
        raw = render_pdf_pages(document, numbers, dpi, budget)
    else:
        raw = decode_image_pages(document, numbers)
    for number, image in zip(numbers, raw):
        # fit_image is a no-op for PDF pages unless the renderer rounded a side by a pixel
        yield Page(document=document, number=number, image=fit_image(image, budget))


_DONE = object()


def prefetch(items: Iterable[T], depth: int = 4) -> Iterator[T]:
    """Produce `items` on a background thread, at most `depth` ahead of the consumer.

    Exceptions raised while producing are re-raised in the consumer at the
    point where the item would have come.  Closing the returned iterator early
    stops the producer after its current item.
    """
    buffer: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple) -> bool:
        while not stop.is_set():
            try:
                buffer.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((_DONE, None))
        except BaseException as exc:  # handed to the consumer, which re-raises it
            put((_DONE, exc))

    worker = threading.Thread(target=produce, name="page-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            item, error = buffer.get()
            if item is _DONE:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
