"""Known answers for the page score, its normalisation and its averages."""

from __future__ import annotations

import pytest

from ocr_app.scoring import PageScore, make_scorer, missed_words, normalize, plain_text, score_page, summarize, turkish_casefold


def test_identical_texts_score_100_and_disjoint_texts_score_0():
    assert score_page("Fatura No: 12", "Fatura No: 12") == PageScore(100.0, 0.0, 0.0)
    score = score_page("abc", "xyz")
    assert score.similarity == 0.0 and score.cer == 1.0 and score.wer == 1.0


def test_one_substitution_in_ten_characters():
    score = score_page("abcdefghiX", "abcdefghij")
    assert score.similarity == pytest.approx(90.0)
    assert score.cer == pytest.approx(0.1)
    assert score.wer == pytest.approx(1.0)  # the only word differs


def test_ned_divides_by_the_longer_text():
    # one insertion: distance 1, longer text has 5 characters, reference has 4
    score = score_page("abcde", "abcd")
    assert score.similarity == pytest.approx(80.0)
    assert score.cer == pytest.approx(0.25)


def test_word_error_rate_counts_words():
    score = score_page("bir iki dört", "bir iki üç dört")
    assert score.wer == pytest.approx(0.25)


def test_empty_texts():
    assert score_page("", "").similarity == 100.0
    assert score_page("", "").cer == 0.0
    missing = score_page("", "metin")
    assert missing.similarity == 0.0 and missing.cer == 1.0 and missing.wer == 1.0
    assert score_page("fazla", "").cer == 1.0


def test_whitespace_emphasis_and_tables_are_not_text():
    assert normalize("**Genel  Toplam:**\n\n 1.234,56  TL ") == "Genel Toplam: 1.234,56 TL"
    assert normalize("_önemli_ dosya_adi 2 * 3") == "önemli dosya_adi 2 * 3"
    assert normalize("| a | b |\n| ---: | :---: |") == normalize("|a|b|\n|---|---|")
    assert score_page("# Başlık\n\n**kalın** metin", "# Başlık kalın metin").similarity == 100.0


def test_plain_text_keeps_the_words_of_markdown_in_order_and_nothing_of_its_structure():
    markdown = "# FATURA\n\n**Tarih:** 14.11.2026\n\n| Ürün | Tutar |\n| --- | ---: |\n| Un (kg) | 472,50 TL |\n| - | 3-4 |"
    assert plain_text(markdown) == "FATURA Tarih: 14.11.2026 Ürün Tutar Un (kg) 472,50 TL - 3-4"
    assert score_page(plain_text(markdown), "FATURA\nTarih: 14.11.2026\nÜrün\nTutar\nUn (kg)\n472,50 TL\n-\n3-4").cer == 0


def test_unicode_nfc():
    decomposed = "s\u0327eker"  # s + combining cedilla
    assert score_page(decomposed, "şeker").similarity == 100.0


def test_turkish_case_folding_only_when_case_is_ignored():
    assert turkish_casefold("IŞIK İZMİR") == "ışık izmir"
    assert score_page("IŞIK", "ışık").similarity < 100.0
    assert make_scorer(ignore_case=True)("IŞIK İZMİR", "ışık izmir").similarity == 100.0
    # dotted and dotless i stay different letters
    assert make_scorer(ignore_case=True)("ISIK", "isik").similarity == 50.0


def test_summary_means_of_categories_and_of_pages():
    summary = summarize([
        ("fatura", PageScore(100.0, 0.0, 0.0)),
        ("fatura", PageScore(80.0, 0.2, 0.4)),
        ("mektup", PageScore(60.0, 0.4, 0.6)),
    ])
    assert summary.per_category["fatura"].similarity == pytest.approx(90.0)
    assert summary.category_mean.similarity == pytest.approx(75.0)
    assert summary.page_mean.similarity == pytest.approx(80.0)
    assert summary.page_mean.cer == pytest.approx(0.2)
    assert summary.pages == 3 and summary.pages_per_category == {"fatura": 2, "mektup": 1}
    assert summary.to_dict()["score"] == pytest.approx(75.0)


def test_missed_words_name_the_letters_a_reading_dropped_and_changed():
    """`Kurulu` read `Kırulu` is one replaced letter, `Disiplin` read `Disipin` one dropped; `Resmî`, missed with
    no wrong word near it, counts as missed but not near."""
    found = missed_words("Yükseköğretim Kırulu Disipin 12", "Yükseköğretim Kurulu Disiplin Resmî 12")
    assert (found.missed, found.near) == (3, 2)
    assert found.edits == {("replaced", "ı", "u"): 1, ("dropped", "", "l"): 1}
    assert missed_words("aynı metin", "aynı metin").missed == 0
