"""Batched decoding in the hf engine (`ocr_app.speculative.batched`): in fp32 each sequence reads exactly
what it reads alone, with and without drafts, whatever its prompt length and whenever it ends."""

from __future__ import annotations

import pytest

from ocr_app.config import load_model_preset
from ocr_app.documents import open_document
from ocr_app.engines.hf import HFEngine
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.pages import iter_pages
from ocr_app.speculative.batched import BatchedDecoder
from ocr_app.speculative.decoder import SpeculativeDecoder
from ocr_app.train_ocr.data import held_out_examples

from .conftest import SAMPLE_PDF

MAX_TOKENS = 24


@pytest.fixture(scope="module")
def images(tiny_preset):
    """Crops of different sizes, so prompts differ in length and sequences join a batch already under way."""
    page = next(iter_pages(open_document(SAMPLE_PDF), [1], tiny_preset.pixels)).image
    boxes = [(0, 0, 256, 64), (0, 64, 128, 96), (64, 0, 448, 192), (0, 128, 64, 160), (32, 32, 320, 320), (0, 0, 96, 288)]
    return [page.crop(box) for box in boxes]


@pytest.mark.parametrize("drafts", [0, 3])
def test_batched_reads_what_each_page_reads_alone(hf_engine, images, drafts):
    settings = GenerationSettings(max_tokens=MAX_TOKENS, drafts=drafts)
    alone = [hf_engine.read(image, settings) for image in images]
    batched = dict(hf_engine.read_many(enumerate(images), settings, concurrency=4))
    assert sorted(batched) == list(range(len(images)))
    for index, page in enumerate(alone):
        assert batched[index].token_ids == page.token_ids and batched[index].text == page.text
        assert batched[index].metrics.finish_reason == page.metrics.finish_reason
        if drafts:
            assert batched[index].metrics.spec.num_drafts == page.metrics.spec.num_drafts
        else:
            assert batched[index].metrics.spec is None


@pytest.fixture(scope="module")
def predictable_engine(predictable_model_dir):
    return HFEngine(load_model_preset(predictable_model_dir))


@pytest.mark.parametrize("drafts", [0, 3])
def test_sequences_that_stop_at_different_steps_leave_the_others_unchanged(predictable_engine, drafts):
    """Text prompts of different lengths and endings walk the predictable model's token cycle from different
    places; a stop token on that cycle ends each sequence at its own step, while the rest of the batch and
    the sequences joining it go on.  Reference: transformers' `generate`, one prompt at a time."""
    engine = predictable_engine
    prompts = ["a", "Fatura No: 2024", "Toplam 1.250,00 TL", "İstanbul, Ankara, İzmir", "KDV %20", "Sayın İlgili,", "Ürün"]
    requests = [(index, engine.processor.tokenizer(prompt, return_tensors="pt")) for index, prompt in enumerate(prompts)]
    outputs = []
    for _, inputs in requests:
        generated = engine.model.generate(**inputs, max_new_tokens=MAX_TOKENS, do_sample=False, eos_token_id=None)
        outputs.append(generated[0, inputs["input_ids"].shape[1] :].tolist())
    # the token whose first occurrence is spread over the most different steps
    stop = max({t for output in outputs for t in output}, key=lambda t: len({o.index(t) for o in outputs if t in o}))
    expected = [output[: output.index(stop) + 1] if stop in output else output for output in outputs]
    assert len({len(tokens) for tokens in expected}) > 2  # the pick really ends sequences at different steps
    head = engine._speculative_decoder().head if drafts else None
    decoder = BatchedDecoder(engine.model, head, [stop], drafts)
    generations = dict(decoder.generate_many(requests, MAX_TOKENS, concurrency=3))
    assert [generations[index].token_ids for index in range(len(prompts))] == expected


def test_drafts_after_an_accepted_stop_token_are_not_counted_in_a_batch(predictable_engine):
    """As the lone decoder counts them (tests/test_speculative_decoder.py): the exact head drafts past a stop
    token too, and those drafts count neither as accepted nor as rejected, in whichever row it happens."""
    engine, drafts = predictable_engine, 3
    head = engine._speculative_decoder().head
    requests = [(index, engine.processor.tokenizer(prompt, return_tensors="pt")) for index, prompt in enumerate(["a", "Fatura No: 2024", "KDV %20"])]
    settings = GenerationSettings(max_tokens=MAX_TOKENS, drafts=drafts)
    cycle = SpeculativeDecoder(engine.model, head, stop_token_ids=[]).generate(requests[0][1], settings).token_ids
    stops_inside_a_round = 0
    for stop in set(cycle):
        batched = dict(BatchedDecoder(engine.model, head, [stop], drafts).generate_many(requests, MAX_TOKENS, concurrency=3))
        alone = SpeculativeDecoder(engine.model, head, stop_token_ids=[stop])
        for index, inputs in requests:
            expected = alone.generate(inputs, settings)
            assert batched[index].token_ids == expected.token_ids and batched[index].stats == expected.stats
            emitted, rounds = len(expected.token_ids) - 1, sum(expected.rounds_by_k.values())
            stops_inside_a_round += expected.stats.num_accepted_tokens == emitted - rounds + 1
    assert stops_inside_a_round  # the case that matters came up


def test_sampled_reads_keep_their_own_seeded_draws(hf_engine, images):
    settings = GenerationSettings(max_tokens=12, temperature=0.8, seed=3)
    batched = dict(hf_engine.read_many(enumerate(images[:3]), settings, concurrency=4))
    assert [batched[index].token_ids for index in range(3)] == [hf_engine.read(image, settings).token_ids for image in images[:3]]


def test_predictable_model_accepts_every_draft_in_a_batch(predictable_engine, images):
    engine = predictable_engine
    settings = GenerationSettings(max_tokens=MAX_TOKENS, drafts=3)
    batched = dict(engine.read_many(enumerate(images), settings, concurrency=4))
    for index, image in enumerate(images):
        alone = engine.read(image, settings)
        spec = batched[index].metrics.spec
        assert batched[index].token_ids == alone.token_ids
        assert spec.num_accepted_tokens == spec.num_draft_tokens == alone.metrics.spec.num_draft_tokens


def test_shipped_model_reads_bands_batched_as_alone_with_drafts():
    """Real acceptance is partial (rows of one verify pass keep different numbers of tokens), the case where each
    row's rollback of attention holes, conv window and recurrent state must be its own."""
    preset = load_model_preset("ocr-tiny-tr")
    engine = HFEngine(preset)
    bands = [example.image for example in held_out_examples("band", 6, False, preset.regions)]
    settings = GenerationSettings(max_tokens=128, drafts=3)
    alone = [engine.read(band, settings) for band in bands]
    batched = dict(engine.read_many(enumerate(bands), settings, concurrency=4))
    assert [batched[index].text for index in range(len(bands))] == [page.text for page in alone]
    rates = [page.metrics.spec.draft_acceptance_rate for page in alone]
    assert any(0 < rate < 1 for rate in rates)
