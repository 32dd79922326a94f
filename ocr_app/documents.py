"""Documents: find input files, tell what they are by their bytes, and check they can be read.

A document is a PDF (read with PyMuPDF) or an image (read with Pillow; TIFF may
hold several pages).  Everything wrong with an input surfaces here as an
`InputError` with a one-line reason, before any model work starts.
"""

from __future__ import annotations

import logging
import os
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pymupdf
from PIL import Image, UnidentifiedImageError

from ocr_app.errors import InputError

log = logging.getLogger(__name__)
pymupdf.TOOLS.mupdf_display_errors(False)

PDF_SUFFIXES = {".pdf"}
IMAGE_FORMATS = {  # Pillow format name -> suffixes that may name it
    "PNG": {".png"},
    "JPEG": {".jpg", ".jpeg", ".jpe", ".jfif"},
    "TIFF": {".tif", ".tiff"},
    "WEBP": {".webp"},
    "BMP": {".bmp", ".dib"},
    "GIF": {".gif"},
}
IMAGE_SUFFIXES = set().union(*IMAGE_FORMATS.values())
DOCUMENT_SUFFIXES = PDF_SUFFIXES | IMAGE_SUFFIXES
# Above this an image is refused rather than decoded (a decompression bomb
# would take gigabytes before it could be downscaled): Pillow's own limit.
MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS

Kind = Literal["pdf", "image"]


@dataclass(frozen=True)
class Document:
    path: Path
    kind: Kind
    page_count: int
    image_format: str | None = None
    password: str | None = None


def _sniff(path: Path) -> Kind | None:
    with path.open("rb") as handle:
        head = handle.read(1024)
    if b"%PDF-" in head:
        return "pdf"
    try:
        with _size_checked_by_us(), Image.open(path) as image:
            return "image" if image.format in IMAGE_FORMATS else None
    except (UnidentifiedImageError, OSError):
        return None


@contextmanager
def _size_checked_by_us():
    """Pillow warns between its soft and hard limits; we refuse with our own message instead."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        yield


def open_document(path: Path, password: str | None = None) -> Document:
    """Check that `path` is a readable PDF or image and count its pages."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a folder, not a document")
    try:
        size = path.stat().st_size
        if size == 0:
            raise InputError(f"{path}: empty file (0 bytes)")
        kind = _sniff(path)
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except Image.DecompressionBombError:
        raise InputError(f"{path}: image is over the {MAX_IMAGE_PIXELS / 1e6:.0f} MP limit; downscale it first") from None
    suffix = path.suffix.lower()
    if kind is None:
        if suffix in PDF_SUFFIXES:
            raise InputError(f"{path}: not a valid PDF (corrupt or not a PDF at all)")
        if suffix in IMAGE_SUFFIXES:
            raise InputError(f"{path}: not a valid {suffix[1:].upper()} image (corrupt or truncated)")
        raise InputError(f"{path}: unsupported format (expected PDF, PNG, JPEG, TIFF, WebP, BMP or GIF)")
    if kind == "pdf":
        if suffix in IMAGE_SUFFIXES:
            raise InputError(f"{path}: the name says {suffix[1:].upper()} but the content is a PDF; rename it")
        return _open_pdf(path, password)
    return _open_image(path)


def _open_pdf(path: Path, password: str | None) -> Document:
    # PyMuPDF's own wording ("Failed to open file '...' as type pdf.") repeats the path and says no more
    # than this; it goes to the debug log.
    try:
        pdf = pymupdf.open(path)
    except (pymupdf.FileDataError, RuntimeError, ValueError) as exc:
        log.debug("PyMuPDF cannot open %s: %s", path, exc)
        raise InputError(f"{path}: corrupt PDF, cannot be opened") from None
    with pdf:
        if pdf.needs_pass:
            if password is None:
                raise InputError(f"{path}: encrypted PDF; give its password with --password")
            if not pdf.authenticate(password):
                raise InputError(f"{path}: wrong password for encrypted PDF")
        if pdf.page_count == 0:
            raise InputError(f"{path}: PDF has no pages")
        try:
            # A truncated file often fails only at its last page; when MuPDF repairs one, that page may load
            # blank although its object was cut off: reading the object itself fails then ("bad xref").
            if pdf.xref_object(pdf.page_xref(pdf.page_count - 1)) == "null":
                raise ValueError("the last page's object is missing")
            pdf.load_page(pdf.page_count - 1)
        except (RuntimeError, ValueError) as exc:
            log.debug("PyMuPDF cannot load the last page of %s: %s", path, exc)
            raise InputError(f"{path}: corrupt PDF, its pages cannot be read") from None
        return Document(path=path, kind="pdf", page_count=pdf.page_count, password=password)


def _open_image(path: Path) -> Document:
    with _size_checked_by_us(), Image.open(path) as image:
        fmt = image.format
        if path.suffix.lower() not in IMAGE_FORMATS[fmt]:
            raise InputError(f"{path}: the name says {path.suffix[1:].upper() or 'nothing'} but the content is {fmt}; rename it")
        width, height = image.size
        if width * height > MAX_IMAGE_PIXELS:
            raise InputError(
                f"{path}: image is {width}x{height} ({width * height / 1e6:.0f} MP), over the "
                f"{MAX_IMAGE_PIXELS / 1e6:.0f} MP limit; downscale it first"
            )
        # Only TIFF pages are document pages; GIF/WebP frames are animation.
        page_count = getattr(image, "n_frames", 1) if fmt == "TIFF" else 1
        try:
            image.load()
        except (OSError, SyntaxError) as exc:
            raise InputError(f"{path}: corrupt {fmt} image ({_first_line(exc)})") from None
    return Document(path=path, kind="image", page_count=page_count, image_format=fmt)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def parse_page_range(spec: str | None, page_count: int) -> list[int]:
    """`1-3,7` -> [1, 2, 3, 7] (1-based, in order, without repeats); None means every page.

    An open range (`5-`) runs to the last page.  Pages past the end are an error,
    so a typo never silently reads less than asked.
    """
    if spec is None or spec.strip() == "":
        return list(range(1, page_count + 1))
    pages: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        try:
            if "-" in part:
                start_text, end_text = part.split("-", 1)
                start = int(start_text)
                end = int(end_text) if end_text.strip() else page_count
            else:
                start = end = int(part)
        except ValueError:
            raise InputError(f"bad page range '{spec}': use e.g. 1-3,7") from None
        if start < 1 or end < start:
            raise InputError(f"bad page range '{spec}': '{part}' is empty or starts below 1")
        if end > page_count:
            raise InputError(f"page range '{spec}' goes past the last page ({page_count})")
        pages.extend(page for page in range(start, end + 1) if page not in pages)
    return pages


def find_documents(inputs: list[Path], pattern: str | None = None) -> list[Path]:
    """Expand folders (recursively, symlink loops cut) into document paths; files pass through.

    Files named directly are kept whatever their suffix, so that `open_document`
    can say what is wrong with them; inside folders only document suffixes count.
    """
    found: list[Path] = []
    for item in inputs:
        if not item.is_dir():
            found.append(item)
            continue
        seen_dirs: set[tuple[int, int]] = set()
        matches: list[Path] = []
        for root, dirs, files in os.walk(item, followlinks=True):
            stat = os.stat(root)
            if (stat.st_dev, stat.st_ino) in seen_dirs:
                dirs[:] = []
                continue
            seen_dirs.add((stat.st_dev, stat.st_ino))
            dirs.sort()
            for name in sorted(files):
                path = Path(root) / name
                if path.suffix.lower() in DOCUMENT_SUFFIXES and (pattern is None or path.match(pattern)):
                    matches.append(path)
        if not matches:
            raise InputError(f"{item}: no documents in this folder (PDF or images)")
        found.extend(matches)
    return found
