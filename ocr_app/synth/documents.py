"""Synthetic documents as blocks (headings, paragraphs, tables) and their exact Markdown.

A document is a tuple of blocks; the renderer draws exactly these blocks and
`to_markdown` writes exactly their text, so the ground truth matches the page
character for character.  Amounts are integers in kuruş so every total adds up.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, Union

from ocr_app.regions import table_row
from ocr_app.synth import text

Align = Literal["left", "center", "right"]


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 1


@dataclass(frozen=True)
class Paragraph:
    text: str
    label: str = ""  # drawn bold before the text: `**Label** text`
    bold: bool = False
    align: Align = "left"


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...]  # right-aligned columns


Block = Union[Heading, Paragraph, Table]
Document = tuple[Block, ...]


def block_markdown(block: Block) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {block.text}"
    if isinstance(block, Paragraph):
        body = f"**{block.text}**" if block.bold else block.text
        return f"**{block.label}** {body}" if block.label else body
    lines = [table_row(block.header), table_row(tuple("---:" if right else "---" for right in block.numeric))]
    lines += [table_row(row) for row in block.rows]
    return "\n".join(lines)


def to_markdown(blocks: tuple[Block, ...]) -> str:
    return "\n\n".join(block_markdown(block) for block in blocks)


def invoice(rng: random.Random) -> Document:
    seller, buyer = text.company(rng), text.company(rng)
    day = text.date(rng)
    items = []
    totals_by_rate: dict[int, int] = {}
    for number, (product, unit) in enumerate(rng.sample(text.PRODUCTS, rng.randint(2, 7)), start=1):
        quantity = rng.randint(1, 40)
        price = rng.choice((rng.randint(100, 9_999), rng.randint(1_000, 250_000)))
        rate = rng.choice((1, 10, 20, 20, 20))
        amount = quantity * price
        totals_by_rate[rate] = totals_by_rate.get(rate, 0) + amount
        items.append((str(number), product, f"{quantity} {unit}", text.money(price), f"%{rate}", text.money(amount)))
    subtotal = sum(totals_by_rate.values())
    taxes = {rate: (base * rate + 50) // 100 for rate, base in sorted(totals_by_rate.items())}
    total = subtotal + sum(taxes.values())
    blocks: list[Block] = [
        Heading(rng.choice(("FATURA", "e-Arşiv Fatura", "SATIŞ FATURASI")), 1),
        Paragraph(seller, bold=True),
        Paragraph(text.address(rng)),
        Paragraph(f"{rng.choice(text.TAX_OFFICES)} V.D. {text.digits(rng, 10)}", label="Vergi Dairesi / VKN:"),
        Paragraph(f"{rng.choice(('ABC', 'FTR', 'GİB', 'EAR'))}{day.year}{text.digits(rng, 9)}", label="Fatura No:"),
        Paragraph(text.short_date(day), label="Fatura Tarihi:"),
        Paragraph(f"{buyer}, {text.address(rng)}", label="Sayın:"),
        Table(("Sıra", "Mal / Hizmet", "Miktar", "Birim Fiyat", "KDV", "Tutar (TL)"), tuple(items),
              (True, False, True, True, True, True)),
        Paragraph(f"{text.money(subtotal)} TL", label="Ara Toplam:", align="right"),
    ]
    blocks += [Paragraph(f"{text.money(tax)} TL", label=f"KDV (%{rate}):", align="right") for rate, tax in taxes.items()]
    blocks += [
        Paragraph(f"{text.money(total)} TL", label="Genel Toplam:", align="right"),
        Paragraph(text.money_in_words(total)),
    ]
    return tuple(blocks)


def letter(rng: random.Random) -> Document:
    sender = text.person(rng)
    blocks: list[Block] = [
        Heading(text.company(rng), 2),
        Paragraph(f"{rng.choice(text.CITIES)}, {text.long_date(text.date(rng))}", align="right"),
        Paragraph(rng.choice(text.LETTER_SUBJECTS), label="Konu:"),
        Paragraph(f"Sayın {text.person(rng)},"),
    ]
    blocks += [Paragraph(text.paragraph(rng)) for _ in range(rng.randint(2, 3))]
    blocks += [Paragraph("Saygılarımla,"), Paragraph(sender, bold=True), Paragraph(text.address(rng))]
    return tuple(blocks)


def article(rng: random.Random) -> Document:
    blocks: list[Block] = [
        Heading(rng.choice(text.ARTICLE_TITLES), 1),
        Paragraph(f"{text.person(rng)}, {text.long_date(text.date(rng))}"),
        Paragraph(text.paragraph(rng, (2, 3))),
    ]
    for section in rng.sample(text.SECTION_TITLES, rng.randint(1, 3)):
        blocks.append(Heading(section, 2))
        blocks += [Paragraph(text.paragraph(rng, (2, 4))) for _ in range(rng.randint(1, 2))]
    return tuple(blocks)


def receipt(rng: random.Random) -> Document:
    day = text.date(rng)
    rows = []
    total = tax = 0
    for item in rng.sample(text.RECEIPT_ITEMS, rng.randint(3, 9)):
        count = rng.randint(1, 4)
        price = count * rng.randint(250, 15_000)
        rate = rng.choice((1, 1, 10, 20))
        total += price
        tax += price * rate // (100 + rate)  # prices on a receipt include KDV
        rows.append((item, f"{count} x", f"{text.money(price)}"))
    return (
        Paragraph(f"{rng.choice(text.COMPANY_WORDS).upper()} MARKET", bold=True, align="center"),
        Paragraph(text.address(rng), align="center"),
        Paragraph(f"{text.short_date(day)} SAAT: {rng.randint(8, 22):02d}:{rng.randint(0, 59):02d}", label="TARİH:"),
        Paragraph(f"{rng.randint(1, 9999):04d}", label="FİŞ NO:"),
        Table(("Ürün", "Adet", "Tutar"), tuple(rows), (False, True, True)),
        Paragraph(f"{text.money(tax)}", label="TOPKDV:", align="right"),
        Paragraph(f"{text.money(total)}", label="TOPLAM:", align="right"),
        Paragraph(rng.choice(("NAKİT", "KREDİ KARTI", "BANKA KARTI")), align="right"),
        Paragraph("MALİ DEĞERİ YOKTUR" if rng.random() < 0.3 else "BİZİ TERCİH ETTİĞİNİZ İÇİN TEŞEKKÜRLER",
                  align="center"),
    )


def form(rng: random.Random) -> Document:
    name = text.person(rng)
    return (
        Heading(rng.choice(("Başvuru Formu", "Üyelik Formu", "Personel Bilgi Formu", "İzin Talep Formu")), 1),
        Paragraph("Lütfen tüm alanları okunaklı şekilde doldurunuz."),
        Heading("Kişisel Bilgiler", 2),
        Paragraph(name, label="Ad Soyad:"),
        Paragraph(text.digits(rng, 11), label="T.C. Kimlik No:"),
        Paragraph(f"{rng.choice(text.CITIES)}, {text.short_date(text.date(rng))}", label="Doğum Yeri ve Tarihi:"),
        Paragraph(text.phone(rng), label="Telefon:"),
        Paragraph(text.address(rng), label="Adres:"),
        Heading(rng.choice(("Başvuru Bilgileri", "Talep Bilgileri")), 2),
        Paragraph(text.short_date(text.date(rng)), label="Başvuru Tarihi:"),
        Paragraph(rng.choice(text.COMPANY_TRADES), label="Birim:"),
        Paragraph(text.paragraph(rng, (1, 2)), label="Açıklama:"),
        Paragraph(f"{name}", label="Başvuru sahibinin imzası:", align="right"),
    )


def with_text(
    blocks: Document, written: Callable[[str], str], cell_written: Callable[[str, bool], str] | None = None
) -> Document:
    """The same blocks with each heading's, paragraph's, label's and header cell's text passed through `written`, and
    each body cell's through `cell_written(text, numeric)` (default: `written`), in that order within a block."""
    cell_written = cell_written or (lambda cell, numeric: written(cell))
    changed: list[Block] = []
    for block in blocks:
        if isinstance(block, Heading):
            changed.append(replace(block, text=written(block.text)))
        elif isinstance(block, Paragraph):
            changed.append(replace(block, text=written(block.text), label=written(block.label)))
        else:
            rows = tuple(tuple(cell_written(cell, numeric) for cell, numeric in zip(cells, block.numeric)) for cells in block.rows)
            changed.append(replace(block, header=tuple(written(cell) for cell in block.header), rows=rows))
    return tuple(changed)


def with_random_words(blocks: Document, rng: random.Random, lexicon: float = 0.0) -> Document:
    """The same layout with every heading, label, paragraph and table cell made of as many words drawn independently.

    The builders draw prose from a few dozen sentences, labels from fixed forms and table cells from listed
    products, which a reader can recite after its first letters; a reader trained only on them learns to
    recall instead of to read.  Text set in capitals stays in capitals (titles, receipts' labels); a
    table's numeric cells stay numbers, amounts drawn anew (`text.amount`) and other figures re-drawn digit
    runs (`10 kg` -> `437 kg`).  `lexicon`: see `text.random_words`.
    """

    def replaced(words: str) -> str:
        drawn = text.random_words(rng, len(words.split()), lexicon) if words else words
        return text.turkish_upper(drawn) if words.isupper() else drawn

    def figure(cell: str) -> str:
        if "," in cell:
            return text.amount(rng)
        return re.sub(r"\d+", lambda digits: str(rng.randint(1, 10 ** (len(digits.group()) + 1))), cell)

    return with_text(blocks, replaced, lambda cell, numeric: figure(cell) if numeric else replaced(cell))


BUILDERS: dict[str, Callable[[random.Random], Document]] = {
    "invoice": invoice,
    "letter": letter,
    "article": article,
    "receipt": receipt,
    "form": form,
}
KINDS: tuple[str, ...] = tuple(BUILDERS)
