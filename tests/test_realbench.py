"""The real-document benchmark: its order-robust measures on crafted strings, its manifest and files, the list of
its sources for keeping it out of training, its seeded scans, and one `ocr-eval real` run with the shipped model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pymupdf
import pytest

from ocr_app.baselines import tesseract
from ocr_app.errors import InputError
from ocr_app.realbench import (
    DEFAULT_ROOT,
    benchmark_sources,
    load_manifest,
    load_real_benchmark,
    read_manifest,
    scan_image,
    score_text_layer,
    select_real_pages,
    text_layer,
)
from ocr_app.scoring import matched_line_cer, word_f1, words

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Kept apart for an independent evaluation (issue 21): nothing may come from them.
RESERVED_REPOS = {
    "uyumazelektrik/muhasebe", "cdinler/muhasebe-sistem", "binceler/go_web_programming",
    "yusufalpergulden/fatura_okuma_program-", "ozgurshahin/show-todays-date", "ozanbabatas59/dilekcematik",
    "tuncerdabak/emlakimza", "senazisanyildiz-cyber/mersinetkinzumre", "agyaglikci/tez",
}
TURKISH_LETTERS = set("çğıöşüÇĞİÖŞÜ")


# --- measures -------------------------------------------------------------------------------------------------


def test_a_shuffled_reading_has_word_f1_one():
    reference = "Gereğinin yapılmasını saygılarımla arz ederim. Madde 5- (1) Bu Yönetmelik"
    shuffled = "(1) Bu Yönetmelik\n\nMadde 5- arz ederim. Gereğinin yapılmasını saygılarımla"
    assert word_f1(shuffled, reference).f1 == 1.0
    assert score_text_layer(shuffled, reference).word_f1 == 1.0
    assert score_text_layer(shuffled, reference).cer > 0.3  # the order-sensitive CER does see the order


def test_a_wrong_word_lowers_word_f1_by_its_share():
    match = word_f1("bir iki üç beş", "bir iki üç dört")  # 3 of 4 words right on each side
    assert (match.precision, match.recall, match.f1) == (0.75, 0.75, 0.75)
    missing = word_f1("bir iki üç", "bir iki üç dört")  # precision 1, recall 3/4: F1 = 6/7
    assert missing.precision == 1.0 and missing.recall == 0.75 and missing.f1 == pytest.approx(6 / 7)
    assert word_f1("a a b", "a b b").f1 == pytest.approx(2 / 3)  # multisets: each word as often as it occurs
    assert word_f1("", "").f1 == 1.0 and word_f1("", "metin").f1 == 0.0 and word_f1("metin", "").f1 == 0.0


def test_words_are_nfkc_with_edge_punctuation_stripped_and_case_kept():
    assert words("“Tezlerinden” (1) 5- 19.02.2024 ....... ﬁrma １２") == [
        "Tezlerinden", "1", "5", "19.02.2024", "firma", "12"]
    assert word_f1("İZMİR", "izmir").f1 == 0.0


def test_matched_line_cer_ignores_line_order_and_counts_each_truth_line_once():
    truth = ["Genel Toplam", "KDV %20"]
    assert matched_line_cer(["KDV %20", "Genel Toplam"], truth) == 0.0
    assert matched_line_cer(["Genel Toplan", "KDV %20"], truth) == pytest.approx(1 / 19)  # one of 19 characters
    # a table row read as one Markdown line still matches the cells the text layer gives one per line
    assert matched_line_cer(["Mal Hizmet | Miktar | Tutar"], ["Mal Hizmet", "Miktar", "Tutar"]) == 0.0
    assert matched_line_cer([], truth) == 1.0 and matched_line_cer(["fazla"], []) == 0.0


# --- the benchmark's files ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def documents():
    return load_manifest()


def test_every_pdf_is_listed_with_source_licence_and_pages(documents):
    on_disk = {path.relative_to(DEFAULT_ROOT).as_posix() for path in DEFAULT_ROOT.rglob("*.pdf")}
    assert on_disk == {document.file for document in documents}
    total = sum(path.stat().st_size for path in DEFAULT_ROOT.rglob("*"))
    assert total < 20 * 2**20
    for document in documents:
        assert document.licence and document.repo.lower() not in RESERVED_REPOS
        if document.stylesheet is not None:
            assert document.stylesheet.licence and document.stylesheet.repo.lower() not in RESERVED_REPOS
        with pymupdf.open(DEFAULT_ROOT / document.file) as pdf:
            assert pdf.page_count == len(document.pages), document.file


def test_every_page_has_a_turkish_text_layer(documents):
    for document in documents:
        for number, text in enumerate(text_layer(DEFAULT_ROOT / document.file), start=1):
            assert len(words(text)) >= 20, f"{document.file} p{number}"
            assert TURKISH_LETTERS & set(text), f"{document.file} p{number}"
            assert "\ufffd" not in text and "˙I" not in text, f"{document.file} p{number}"


def test_the_manifest_is_checked(tmp_path):
    with pytest.raises(InputError, match="no sources.toml"):
        load_manifest(tmp_path)
    (tmp_path / "sources.toml").write_text('[[document]]\nfile = "a/x.pdf"\n', encoding="utf-8")
    with pytest.raises(InputError, match="document.0.title"):
        read_manifest(tmp_path)
    manifest = (DEFAULT_ROOT / "sources.toml").read_text(encoding="utf-8")
    (tmp_path / "sources.toml").write_text(manifest, encoding="utf-8")
    with pytest.raises(InputError, match="listed but missing"):
        load_manifest(tmp_path)
    # A rendered document's command must name every file it is given.
    rendered = manifest.replace("--print-to-pdf={pdf}", "--print-to-pdf=out.pdf", 1)
    (tmp_path / "sources.toml").write_text(rendered, encoding="utf-8")
    with pytest.raises(InputError, match="stylesheet.command"):
        read_manifest(tmp_path)


def test_benchmark_sources_name_its_repositories_and_files(documents):
    sources = benchmark_sources()
    assert sources.holds_repo("Freddie336/Atauni-Mevzuat-RAG-Sistemi") and sources.holds_repo("CGTYYLMZ/pautez")
    assert not RESERVED_REPOS & sources.repos
    assert all(sources.holds_file(DEFAULT_ROOT / document.file) for document in documents)
    assert not sources.holds_file(PROJECT_ROOT / "samples" / "fatura.pdf")
    assert {document.source_sha256 for document in documents} <= sources.sha256
    # A rendered invoice comes from two files, its XML and the stylesheet: both are kept out of training.
    rendered = [document for document in documents if document.stylesheet is not None]
    assert rendered and all(sources.holds_repo(d.stylesheet.repo) and d.stylesheet.sha256 in sources.sha256
                            for d in rendered)


def test_invoices_come_from_several_sources_and_stylesheets(documents):
    invoices = [document for document in documents if document.category == "invoice"]
    assert len({(d.repo, d.path) for d in invoices}) >= 3
    assert len({d.stylesheet.sha256 for d in invoices if d.stylesheet is not None}) >= 2


def test_pages_come_in_both_renderings_and_are_selected_together():
    pages = load_real_benchmark()
    born = [page for page in pages if page.rendering == "born-digital"]
    assert len(pages) == 2 * len(born) and len(born) == sum(len(d.pages) for d in load_manifest())
    chosen = select_real_pages(pages, limit=3)
    assert len(chosen) == 6 and {page.id.split("/", 1)[1] for page in chosen if page.rendering == "scanned"} == {
        page.id.split("/", 1)[1] for page in chosen if page.rendering == "born-digital"}
    with pytest.raises(InputError, match="renderings"):
        load_real_benchmark(renderings=("photo",))
    forms = load_real_benchmark(renderings=("born-digital",), categories=("form",))
    assert forms and {page.category for page in forms} == {"form"}
    with pytest.raises(InputError, match="no category receipt"):
        load_real_benchmark(categories=("form", "receipt"))


def test_a_scan_is_the_same_for_the_same_seed_and_looks_scanned():
    pdf = DEFAULT_ROOT / "legislation" / "rg-disiplin-yonetmeligi-kaldirma.pdf"
    # seeds "b" and "k" both draw 150 dpi, the cheapest scans
    first, again, other = scan_image(pdf, 1, "b"), scan_image(pdf, 1, "b"), scan_image(pdf, 1, "k")
    assert np.array_equal(np.asarray(first), np.asarray(again))
    assert first.size == other.size and not np.array_equal(np.asarray(first), np.asarray(other))
    width_inches = pymupdf.open(pdf)[0].rect.width / 72
    assert round(first.width / width_inches) == 150
    corner = np.asarray(first)[:40, :40].mean()
    assert 190 < corner < 245  # grey paper, not white


# --- ocr-eval real --------------------------------------------------------------------------------------------


def _one_page_benchmark(root: Path) -> Path:
    """A benchmark folder of the shortest page (a Resmî Gazete regulation of 56 words), so the run stays short."""
    (document,) = [d for d in load_manifest() if d.file == "legislation/rg-disiplin-yonetmeligi-kaldirma.pdf"]
    (root / "legislation").mkdir(parents=True)
    shutil.copy(DEFAULT_ROOT / document.file, root / document.file)
    entry = {key: value for key, value in document.model_dump().items() if key != "pages" and value is not None}
    lines = [f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in entry.items()]
    (root / "sources.toml").write_text("[[document]]\n" + "\n".join(lines) + f"\npages = {document.pages}\n",
                                       encoding="utf-8")
    return root


def test_ocr_eval_real_scores_the_shipped_model_and_tesseract(tmp_path):
    out = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.eval", "real", str(_one_page_benchmark(tmp_path / "bench")),
         "--renderings", "born-digital", "--baseline", "tesseract", "-o", str(out)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert {path.name for path in out.iterdir()} == {"report.md", "report.json", "report.png"}
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    (page,) = report["pages"]
    assert page["id"] == "born-digital/legislation/rg-disiplin-yonetmeligi-kaldirma/p1"
    model = page["readings"]["model, No MTP"]
    assert model["text"].strip() and 0.0 < model["word_f1"] <= 1.0
    assert "| born-digital | **all** | 1 |" in done.stdout
    if tesseract.unavailable_reason() is None:
        (baseline,) = [reading for name, reading in page["readings"].items() if name.startswith("tesseract")]
        assert baseline["word_f1"] > 0.8  # Tesseract reads a clean official page almost word for word


def test_ocr_eval_real_bad_folder_is_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.eval", "real", str(tmp_path), "-o", str(tmp_path / "r")],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
    )
    assert done.returncode == 1 and "no sources.toml" in done.stderr and "Traceback" not in done.stderr
