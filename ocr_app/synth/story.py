"""Documents made as real ones are made: HTML and CSS laid out into a PDF by PyMuPDF's `Story`.

The block renderer (`render.py`) draws one kind of page: left-aligned blocks, one table style.  Real invoices
and letters come out of HTML templates and word processors: ruled e-Fatura tables with a dozen columns, two
columns of key/value pairs beside a letterhead, numbered lists, justified paragraphs, small print in the
footer, text in two columns.  Here such pages are written as HTML from a seed, laid out by `Story` in the
type of real documents (`render.DOCUMENT_FAMILIES` where installed, DejaVu otherwise), and saved as a PDF
whose text layer is the truth: `train_ocr.textlayer` cuts its pages as `ocr-read` would and answers each part.
"""

from __future__ import annotations

import html
import io
import random
from pathlib import Path

import pymupdf

from ocr_app.synth import text
from ocr_app.synth.render import FONTS_DIR, family_files, installed_families, spelled_for

A4 = pymupdf.paper_rect("a4")


def _words(rng: random.Random, low: int, high: int) -> str:
    return text.random_words(rng, rng.randint(low, high), lexicon=0.8)


def _css(rng: random.Random, family: str) -> str:
    regular, bold, italic = (Path(path).name for path in family_files(family))
    size = rng.choice((8, 9, 9, 10, 10, 11, 12))
    rule = rng.choice(("0.5pt solid #000", "1pt solid #333", "0.5pt solid #777"))
    return f"""
@font-face {{font-family: doc; src: url({regular});}}
@font-face {{font-family: doc; src: url({bold}); font-weight: bold;}}
@font-face {{font-family: doc; src: url({italic}); font-style: italic;}}
* {{font-family: doc; font-size: {size}pt; line-height: {rng.choice((1.15, 1.3, 1.5))};}}
h1 {{font-size: {size + rng.randint(3, 8)}pt; text-align: {rng.choice(("left", "center"))};}}
h2 {{font-size: {size + rng.randint(1, 3)}pt;}}
table {{border-collapse: collapse; width: 100%;}}
table.ruled td, table.ruled th {{border: {rule}; padding: 2pt 4pt;}}
table.plain td {{padding: 1pt 6pt 1pt 0;}}
td.num {{text-align: right;}}
p {{text-align: {rng.choice(("left", "justify"))}; margin: 0 0 {rng.choice((2, 4, 6))}pt 0;}}
.small {{font-size: {max(6, size - 3)}pt;}}
.right {{text-align: right;}}
"""


def _key_values(rng: random.Random, pairs: list[tuple[str, str]]) -> str:
    rows = "".join(f"<tr><td><b>{html.escape(key)}</b></td><td>{html.escape(value)}</td></tr>" for key, value in pairs)
    return f'<table class="{rng.choice(("plain", "ruled"))}">{rows}</table>'


def invoice(rng: random.Random) -> str:
    """An e-Fatura / e-Arşiv invoice: letterhead and the invoice's key/value pairs in two columns, the buyer, a ruled
    table of lines, the totals, the amount in words and small print."""
    day = text.date(rng)
    seller = [f"<b>{html.escape(text.company(rng))}</b>", html.escape(text.address(rng)),
              f"Tel: {text.phone(rng)}", f"{rng.choice(text.TAX_OFFICES)} V.D. {text.vkn(rng)}"]
    keys = [("Özelleştirme No", "TR1.2"), ("Senaryo", rng.choice(("EARSIVFATURA", "TEMELFATURA", "TICARIFATURA"))),
            ("Fatura Tipi", rng.choice(("SATIS", "IADE", "ISTISNA"))), ("Fatura No", text.invoice_number(rng, day.year)),
            ("Fatura Tarihi", text.short_date(day)), ("ETTN", text.ettn(rng))]
    head = (f'<table class="plain"><tr><td>{"<br/>".join(seller)}</td>'
            f"<td>{_key_values(rng, rng.sample(keys, rng.randint(3, len(keys))))}</td></tr></table>")
    buyer = f"<p><b>SAYIN</b><br/>{html.escape(text.company(rng))}<br/>{html.escape(text.address(rng))}<br/>VKN: {text.vkn(rng)}</p>"
    columns = ["Sıra No", "Mal Hizmet", "Miktar", "Birim Fiyat", "İskonto Oranı", "KDV Oranı", "KDV Tutarı", "Mal Hizmet Tutarı"]
    columns = columns[: rng.randint(5, len(columns))]
    rows = []
    for number in range(1, rng.randint(2, 9)):
        cells = [str(number), html.escape(_words(rng, 1, 4)), f"{rng.randint(1, 60)} {rng.choice(('Adet', 'Kg', 'Saat', 'Paket'))}"]
        cells += [text.priced(rng) for _ in columns[3:]]
        rows.append("<tr>" + "".join(f'<td class="{"num" if index > 1 else ""}">{cell}</td>'
                                     for index, cell in enumerate(cells[: len(columns)])) + "</tr>")
    table = (f'<table class="ruled"><tr>{"".join(f"<th>{html.escape(column)}</th>" for column in columns)}</tr>'
             f'{"".join(rows)}</table>')
    totals = _key_values(rng, [(label, text.priced(rng)) for label in
                               ("Mal Hizmet Toplam Tutarı", "Hesaplanan KDV", "Vergiler Dahil Toplam Tutar", "Ödenecek Tutar")])
    words = text.money_in_words(round(10 ** rng.uniform(3, 7)))
    notes = (f'<p class="small">Yalnız: {html.escape(words)}</p>'
             f'<p class="small">IBAN: {text.iban(rng)} — {html.escape(_words(rng, 6, 20))}</p>')
    return f"<h1>{rng.choice(('e-Arşiv Fatura', 'e-FATURA', 'FATURA'))}</h1>{head}{buyer}{table}<br/>{totals}{notes}"


def letter(rng: random.Random) -> str:
    """An official letter (resmi yazı): a centred heading of the institution, number and subject with the date on
    the right, the addressee, justified paragraphs, a numbered list, the signature and its enclosures."""
    institution = "<br/>".join(html.escape(line) for line in
                              ("T.C.", text.turkish_upper(_words(rng, 2, 4)), text.turkish_upper(_words(rng, 2, 5))))
    heading = f'<p style="text-align:center"><b>{institution}</b></p>'
    meta = (f'<table class="plain"><tr><td><b>Sayı:</b> {text.digits(rng, 8)}-{rng.randint(100, 999)}-E.{text.digits(rng, 7)}</td>'
            f'<td class="num">{text.dated(rng)}</td></tr><tr><td><b>Konu:</b> {html.escape(_words(rng, 2, 6))}</td><td></td></tr></table>')
    addressee = f'<p style="text-align:center"><b>{html.escape(text.turkish_upper(_words(rng, 2, 5)))}</b></p>'
    body = "".join(f"<p>{html.escape(_words(rng, 20, 60))}</p>" for _ in range(rng.randint(1, 3)))
    items = "".join(f"<li>{html.escape(_words(rng, 4, 16))}</li>" for _ in range(rng.randint(2, 5)))
    listing = f"<ol>{items}</ol>"
    closing = f"<p>{html.escape(_words(rng, 6, 14))}</p>"
    signature = f'<p class="right"><b>{html.escape(text.person(rng))}</b><br/>{html.escape(_words(rng, 1, 3))}</p>'
    enclosures = "".join(f"<br/>{number}- {html.escape(_words(rng, 2, 5))}" for number in range(1, rng.randint(2, 4)))
    footer = f'<p class="small">Adres: {html.escape(text.address(rng))} Tel: {text.phone(rng)} e-Posta: {text.code(rng).lower()}@{text.code(rng).lower()}.gov.tr</p>'
    return f"{heading}{meta}{addressee}{body}{listing}{closing}{signature}<p><b>Ek:</b>{enclosures}</p>{footer}"


def columns(rng: random.Random) -> str:
    """Text in two columns (laid out by `document` into two frames), headed sections, a small table."""
    parts = [f"<h1>{html.escape(text.turkish_upper(_words(rng, 2, 6)))}</h1>"]
    for _ in range(rng.randint(2, 4)):
        parts.append(f"<h2>{rng.randint(1, 9)}. {html.escape(_words(rng, 1, 4))}</h2>")
        parts += [f"<p>{html.escape(_words(rng, 25, 70))}</p>" for _ in range(rng.randint(1, 2))]
    rows = "".join(f"<tr><td>{html.escape(_words(rng, 1, 2))}</td><td class='num'>{text.priced(rng)}</td></tr>" for _ in range(3))
    parts.append(f'<table class="ruled">{rows}</table>')
    return "".join(parts)


def petition(rng: random.Random) -> str:
    """A petition (dilekçe) or application form: the office addressed, centred; a body whose particulars are
    blanks to fill in (`........ Bölümü ........ numaralı öğrencisiyim`); the applicant's fields, some filled
    and some left as blanks; the date and signature blanks."""
    office = text.turkish_upper(f"{_words(rng, 1, 3)} {rng.choice(('MÜDÜRLÜĞÜNE', 'DEKANLIĞINA', 'BAŞKANLIĞINA', 'REKTÖRLÜĞÜNE'))}")
    sentences = []
    for _ in range(rng.randint(2, 5)):
        pieces = [_words(rng, 1, 5) if rng.random() < 0.6 else text.blank(rng) for _ in range(rng.randint(2, 6))]
        sentences.append(html.escape(" ".join(pieces)) + ".")
    body = f"<p>{' '.join(sentences)}</p><p>{html.escape(_words(rng, 4, 10))}.</p>"
    filled = {"Adı Soyadı": text.person(rng), "T.C. Kimlik No": text.tckn(rng), "Telefon": text.phone(rng),
              "Adres": text.address(rng), "Öğrenci No": text.digits(rng, 9), "Bölümü": _words(rng, 1, 3),
              "E-posta": f"{text.code(rng).lower()}@{text.code(rng).lower()}.com"}
    fields = [(key, value if rng.random() < 0.4 else text.blank(rng)) for key, value in rng.sample(sorted(filled.items()), rng.randint(3, 7))]
    closing = (f'<p class="right">{"..../..../20...." if rng.random() < 0.5 else html.escape(text.blank(rng))}<br/>'
               f'İmza: {html.escape(text.blank(rng))}</p>')
    return f'<p style="text-align:center"><b>{html.escape(office)}</b></p>{body}{closing}{_key_values(rng, fields)}'


BUILDERS = {"invoice": invoice, "letter": letter, "columns": columns, "petition": petition}


def document(rng: random.Random) -> bytes:
    """A PDF of one to two A4 pages: one of `BUILDERS`' HTML in a family of real documents' type, laid out by
    `Story` (a `columns` page in two frames), with the characters the family lacks spelled out."""
    families = installed_families() or ("sans", "serif")
    family = rng.choice(families)
    kind = rng.choice(tuple(BUILDERS))
    markup = spelled_for(family, BUILDERS[kind](rng))
    archive = pymupdf.Archive()
    for folder in {(FONTS_DIR / path).parent for path in family_files(family)}:  # an absolute path stays itself
        archive.add(str(folder))
    story = pymupdf.Story(html=markup, user_css=_css(rng, family), archive=archive)
    margin = rng.uniform(36, 72)
    page = A4 + (margin, margin, -margin, -margin)
    frames = [page]
    if kind == "columns":
        middle = (page.x0 + page.x1) / 2
        frames = [pymupdf.Rect(page.x0, page.y0, middle - 9, page.y1), pymupdf.Rect(middle + 9, page.y0, page.x1, page.y1)]
    output = io.BytesIO()
    writer = pymupdf.DocumentWriter(output)
    more, pages = True, 0
    while more and pages < 2:
        device = writer.begin_page(A4)
        for frame in frames:
            more, _ = story.place(frame)
            story.draw(device)
            if not more:
                break
        writer.end_page()
        pages += 1
    writer.close()
    return output.getvalue()
