"""Repetition loops: detected on the token tail, retried once; on the hf engine losslessly (loops banned)."""

from __future__ import annotations

from dataclasses import replace

import random

import pytest

from ocr_app.config import load_mode_preset
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.pipeline import ReadJob, read_documents
from ocr_app.repetition import MAX_PERIOD, MIN_REPEATS, MIN_SPAN, RetryDegenerate, loop_tokens, repetition_period
from tests.conftest import SAMPLE_PDF


def test_period_of_a_looping_tail():
    prefix = list(range(100, 140))
    assert repetition_period(prefix + [7] * MIN_SPAN) == 1
    assert repetition_period(prefix + [1, 2, 3] * 10) == 3
    loop = list(range(MAX_PERIOD))
    assert repetition_period(prefix + loop * MIN_REPEATS) == MAX_PERIOD


def test_no_loop_in_varied_or_short_tails():
    assert repetition_period(list(range(200))) is None
    assert repetition_period([7] * (MIN_SPAN - 1)) is None
    # A line repeated fewer than MIN_REPEATS times is not a loop yet.
    line = list(range(40))
    assert repetition_period(list(range(500, 520)) + line * (MIN_REPEATS - 1)) is None


def test_loop_tokens_are_exactly_those_that_end_the_output_in_a_loop():
    rng = random.Random(0)
    for _ in range(300):
        # Few symbols and pasted repeats, so that many tails are one token short of a loop.
        ids = [rng.randrange(3) for _ in range(rng.randrange(40))]
        unit = [rng.randrange(3) for _ in range(rng.randrange(1, 9))]
        ids += unit * rng.randrange(6)
        banned = loop_tokens(ids)
        for token in range(3):
            assert (token in banned) == (repetition_period([*ids, token]) is not None)
    line = list(range(100, 100 + MAX_PERIOD))
    assert loop_tokens(line * MIN_REPEATS) == {100}  # the longest period: one token more would repeat it again
    assert loop_tokens([7] * (MIN_SPAN - 1)) == {7}
    assert loop_tokens([7] * (MIN_SPAN - 2)) == set()


@pytest.fixture(scope="module")
def first_page(tiny_preset):
    from ocr_app.documents import open_document
    from ocr_app.pages import iter_pages

    document = open_document(SAMPLE_PDF, None)
    return next(iter_pages(document, [1], tiny_preset.pixels, 72)).image


def test_looping_page_is_read_again(hf_engine, tiny_preset, first_page):
    # The random tiny model falls into a loop of one token under greedy decoding.
    settings = GenerationSettings(max_tokens=32)
    greedy = hf_engine.read(first_page, settings)
    assert greedy.metrics.finish_reason == "length" and repetition_period(greedy.token_ids) is not None

    engine = RetryDegenerate(hf_engine, tiny_preset.retry)
    page = engine.read(first_page, settings)
    again = engine.read(first_page, settings)
    assert page.metrics.retried
    assert page.token_ids != greedy.token_ids
    assert page.token_ids == again.token_ids
    # The retry is greedy with loops banned: no prefix of it ends in a loop.
    assert all(repetition_period(page.token_ids[:end]) is None for end in range(len(page.token_ids) + 1))


def test_retry_reads_the_same_with_and_without_drafts(hf_engine, tiny_preset, first_page):
    """The lossless re-read (fp32): the ban is applied at every verified position of speculative decoding."""
    engine = RetryDegenerate(hf_engine, tiny_preset.retry)
    plain = engine.read(first_page, GenerationSettings(max_tokens=40))
    drafted = engine.read(first_page, GenerationSettings(max_tokens=40, drafts=3))
    assert plain.metrics.retried and drafted.metrics.retried
    assert drafted.metrics.spec.num_drafts > 0
    assert drafted.token_ids == plain.token_ids and drafted.text == plain.text


def test_bulk_reading_retries_looping_pages_after_the_first_pass(hf_engine, tiny_preset, tmp_path):
    settings = GenerationSettings(max_tokens=32)
    job = ReadJob(model=tiny_preset, mode=load_mode_preset("bulk"), settings=settings)
    engine = RetryDegenerate(hf_engine, tiny_preset.retry)  # what make_engine returns
    [streamed] = read_documents([SAMPLE_PDF], engine, replace(job, mode=load_mode_preset("low-latency")))
    [bulk] = read_documents([SAMPLE_PDF], engine, job)
    assert [page.number for page in bulk.pages] == [1, 2]
    for alone, in_bulk in zip(streamed.pages, bulk.pages):
        assert in_bulk.metrics.retried and in_bulk.text == alone.text  # the same greedy retry


def test_page_that_ends_by_itself_is_kept(hf_engine, tiny_preset, first_page):
    settings = GenerationSettings(max_tokens=MIN_SPAN - 1)  # too short to be a loop
    page = RetryDegenerate(hf_engine, tiny_preset.retry).read(first_page, settings)
    assert not page.metrics.retried
    assert page.token_ids == hf_engine.read(first_page, settings).token_ids
