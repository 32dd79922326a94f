"""Documents: every kind of bad input gets one clear InputError; page ranges parse like marker's."""

from __future__ import annotations

import os
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from ocr_app.documents import MAX_IMAGE_PIXELS, find_documents, open_document, parse_page_range
from ocr_app.errors import InputError

from .conftest import SAMPLE_PDF

ZERO_PAGE_PDF = b"""%PDF-1.4
1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj
2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj
trailer << /Root 1 0 R >>
%%EOF
"""


def make_pdf(path: Path, pages: int = 3, password: str | None = None) -> Path:
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        doc.new_page().insert_text((72, 72), f"Sayfa {number}", fontsize=20)
    if password:
        doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw=password, owner_pw=password)
    else:
        doc.save(path)
    return path


def error_for(path: Path, password: str | None = None) -> str:
    with pytest.raises(InputError) as caught:
        open_document(path, password)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    return message


def test_reads_sample_pdf():
    document = open_document(SAMPLE_PDF)
    assert (document.kind, document.page_count) == ("pdf", 2)


def test_missing_file(tmp_path):
    assert "no such file" in error_for(tmp_path / "yok.pdf")


def test_zero_byte_file(tmp_path):
    path = tmp_path / "bos.pdf"
    path.write_bytes(b"")
    assert "empty file" in error_for(path)


def test_truncated_pdf(tmp_path):
    whole = make_pdf(tmp_path / "whole.pdf", pages=5).read_bytes()
    path = tmp_path / "kesik.pdf"
    path.write_bytes(whole[: len(whole) // 3])
    assert "PDF" in error_for(path)


def test_pdf_cut_before_its_last_page_is_not_read_as_blank_pages(tmp_path):
    """MuPDF repairs a file cut just before its last page's object and loads that page blank; a third of a
    file was cut so once in ~200 saves (their lengths vary by a few bytes), and the file passed as whole."""
    whole_path = make_pdf(tmp_path / "whole.pdf", pages=5)
    whole = whole_path.read_bytes()
    with pymupdf.open(whole_path) as pdf:
        last = pdf.page_xref(pdf.page_count - 1)
    path = tmp_path / "kesik.pdf"
    path.write_bytes(whole[: whole.index(f"\n{last} 0 obj".encode())])
    with pymupdf.open(path) as pdf:
        assert pdf.page_count == 5 and pdf.load_page(4).get_text() == ""  # what MuPDF gives on its own
    assert error_for(path) == f"{path}: corrupt PDF, its pages cannot be read"


def test_corrupt_pdf_is_our_one_line_not_the_librarys(tmp_path):
    """A PDF header over bytes PyMuPDF cannot open: the message names the file once, in our words."""
    path = tmp_path / "dekont.pdf"
    path.write_bytes(b"%PDF-1.4\n" + bytes(range(256)) * 20)
    assert error_for(path) == f"{path}: corrupt PDF, cannot be opened"


def test_garbage_named_pdf(tmp_path):
    path = tmp_path / "rapor.pdf"
    path.write_bytes(b"this is plain text, not a PDF\n" * 10)
    assert "not a valid PDF" in error_for(path)


def test_extension_that_lies(tmp_path):
    image_named_pdf = tmp_path / "fatura.pdf"
    Image.new("RGB", (64, 64), "white").save(image_named_pdf, format="PNG")
    assert "content is PNG" in error_for(image_named_pdf)
    pdf_named_png = tmp_path / "sayfa.png"
    pdf_named_png.write_bytes(SAMPLE_PDF.read_bytes())
    assert "content is a PDF" in error_for(pdf_named_png)


def test_encrypted_pdf_needs_password(tmp_path):
    path = make_pdf(tmp_path / "gizli.pdf", pages=2, password="parola")
    assert "--password" in error_for(path)
    assert "wrong password" in error_for(path, password="yanlış")
    assert open_document(path, password="parola").page_count == 2


def test_pdf_with_zero_pages(tmp_path):
    path = tmp_path / "sifir.pdf"
    path.write_bytes(ZERO_PAGE_PDF)
    assert "no pages" in error_for(path)


@pytest.mark.parametrize("times_limit", [1.1, 2.5])  # Pillow warns past 1x and raises past 2x
def test_pixel_bomb_is_refused(tmp_path, times_limit):
    side = int((MAX_IMAGE_PIXELS * times_limit) ** 0.5)
    path = tmp_path / "bomba.png"
    # A 1-bit image compresses to almost nothing but decodes to hundreds of MP.
    Image.frombytes("1", (side, side), bytes(side * ((side + 7) // 8))).save(path)
    assert path.stat().st_size < 5_000_000
    message = error_for(path)
    assert "over the" in message and "MP limit" in message


def test_unsupported_format(tmp_path):
    path = tmp_path / "notlar.docx"
    path.write_bytes(b"PK\x03\x04 not really a docx")
    assert "unsupported format" in error_for(path)


def test_folder_is_not_a_document(tmp_path):
    assert "is a folder" in error_for(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path):
    path = make_pdf(tmp_path / "kilitli.pdf")
    path.chmod(0)
    assert "permission denied" in error_for(path)


def test_find_documents_walks_folders_and_cuts_symlink_loops(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    make_pdf(tmp_path / "a" / "bir.pdf", pages=1)
    Image.new("RGB", (32, 32)).save(tmp_path / "a" / "b" / "iki şey.png")
    (tmp_path / "a" / "b" / "notes.txt").write_text("not a document")
    (tmp_path / "a" / "b" / "loop").symlink_to(tmp_path / "a")
    found = find_documents([tmp_path / "a"])
    assert [p.name for p in found] == ["bir.pdf", "iki şey.png"]
    assert [p.name for p in find_documents([tmp_path / "a"], "*.png")] == ["iki şey.png"]


def test_find_documents_empty_folder(tmp_path):
    with pytest.raises(InputError, match="no documents"):
        find_documents([tmp_path])


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
        ("1-3,7", [1, 2, 3, 7]),
        ("7,1-3", [7, 1, 2, 3]),
        (" 2 , 2-3 ", [2, 3]),
        ("8-", [8, 9, 10]),
        ("10", [10]),
    ],
)
def test_page_range(spec, expected):
    assert parse_page_range(spec, 10) == expected


@pytest.mark.parametrize("spec", ["0", "3-1", "a-b", "1-3,x", "11", "9-12", "-"])
def test_bad_page_range(spec):
    with pytest.raises(InputError):
        parse_page_range(spec, 10)
