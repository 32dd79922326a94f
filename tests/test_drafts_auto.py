"""`--drafts auto` (`ocr_app.speculative.auto`): the chooser's arithmetic, the hf engine choosing K as it reads
(same text as plain greedy decoding in fp32), the CLI option, vLLM's choice before start, and the reports."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from itertools import cycle

import pytest
from typer.testing import CliRunner

from ocr_app.cli.read import app as read_app
from ocr_app.config import AutoDraftsPreset, load_model_preset
from ocr_app.documents import open_document
from ocr_app.engines.hf import HFEngine
from ocr_app.engines.protocol import AUTO_DRAFTS, GenerationSettings, parse_drafts
from ocr_app.errors import ConfigError
from ocr_app.pages import iter_pages
from ocr_app.speculative.auto import (
    MAX_DRAFTS,
    PROBE_EVERY,
    AcceptanceCounts,
    AutoDrafts,
    DraftCosts,
    choose,
    fixed_choice,
    prior_conditional,
)

from .conftest import PROJECT_ROOT, SAMPLE_PDF

MAX_TOKENS = 24
TOB_MINI = PROJECT_ROOT / "samples" / "tob-mini"


def brute_force_k(acceptance, verify, draft):
    """The rate of every K written out, the argmax taken by hand."""
    best, best_rate = None, -1.0
    for k in range(MAX_DRAFTS + 1):
        tokens = 1 + sum(acceptance[:k])
        rate = tokens / (verify(k + 1) + k * draft)
        if rate > best_rate:
            best, best_rate = k, rate
    return best, best_rate


@pytest.mark.parametrize("acceptance, verify_ms, draft_ms", [
    ([0.83, 0.67, 0.56, 0.47, 0.42, 0.38, 0.35], {1: 10.0, 2: 10.5, 4: 11.5, 8: 14.0}, 0.8),
    ([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3], {1: 4.0, 2: 6.0, 4: 10.0, 8: 18.0}, 0.5),  # verify grows with T
    ([0.6, 0.3, 0.1, 0.05, 0.02, 0.01, 0.0], {1: 5.0, 8: 5.5}, 2.0),  # dear head steps
])
def test_choose_returns_the_argmax_of_the_expected_rate(acceptance, verify_ms, draft_ms):
    costs = DraftCosts({t: ms / 1000 for t, ms in verify_ms.items()}, draft_ms / 1000)
    expected_k, expected_rate = brute_force_k(acceptance, costs.verify, costs.draft_s)
    choice = choose(acceptance, costs)
    assert choice.k == expected_k
    assert choice.rates[choice.k] == pytest.approx(expected_rate)
    assert f"K={expected_k}" in choice.why()


def test_costs_interpolate_between_timed_token_counts():
    costs = DraftCosts({1: 1.0, 2: 2.0, 4: 3.0, 8: 5.0}, 0.1)
    assert [costs.verify(t) for t in (1, 3, 6, 8, 12)] == [1.0, 2.5, 4.0, 5.0, 7.0]
    # a batch of 2 verifying K+1 = 2 tokens each: one forward over 4 tokens, head steps grow like verify(2)
    assert costs.round_s(1, batch=2) == pytest.approx(3.0 + 0.1 * 2.0)


def test_perfect_acceptance_and_cheap_verify_picks_the_most_drafts():
    costs = DraftCosts({1: 0.010, 8: 0.0101}, 0.0001)
    assert choose([1.0] * MAX_DRAFTS, costs).k == MAX_DRAFTS


def test_zero_acceptance_picks_plain_decoding():
    costs = DraftCosts({1: 0.010, 8: 0.0101}, 0.0001)
    assert choose([0.0] * MAX_DRAFTS, costs).k == 0


def test_counts_are_blended_with_the_prior_so_a_few_rounds_do_not_swing_it():
    prior = prior_conditional([0.8, 0.6])
    assert prior[:3] == pytest.approx([0.8, 0.75, 0.75])  # the last ratio carried on
    counts = AcceptanceCounts.empty()
    counts.observe(3, 0)  # one round rejecting its first draft
    assert counts.reached[:3] == [1, 0, 0] and counts.accepted[:3] == [0, 0, 0]
    assert counts.acceptance(prior, weight=32)[0] == pytest.approx(0.8 * 32 / 33)
    for _ in range(1000):  # many rounds accepting 2 of 3
        counts.observe(3, 2)
    blended = counts.acceptance(prior, weight=32)
    assert blended[1] == pytest.approx(blended[0] * 1.0, rel=0.05) and blended[2] < 0.1


def test_measured_round_times_move_the_choice():
    """Rounds at K=7 measured far dearer than the costs predict, at K=1 as predicted: K=7 loses its lead."""
    costs = DraftCosts({1: 0.010, 8: 0.011}, 0.0001)
    auto = AutoDrafts(AutoDraftsPreset(acceptance=[1.0] * MAX_DRAFTS), costs, "test")
    assert auto.choose() == MAX_DRAFTS
    for _ in range(16):
        auto.observe_round(MAX_DRAFTS, 1, costs.round_s(MAX_DRAFTS) + 1.0, [(MAX_DRAFTS, MAX_DRAFTS)])
        auto.observe_round(1, 1, costs.round_s(1), [(1, 1)])
    assert auto.choose() not in (MAX_DRAFTS, 0)


def test_at_k0_a_round_now_and_then_drafts_one_token():
    auto = AutoDrafts(AutoDraftsPreset(acceptance=[0.0]), DraftCosts({1: 0.01, 8: 0.02}, 0.001), "test")
    chosen = [auto.choose() for _ in range(2 * PROBE_EVERY)]
    assert chosen.count(1) == 2 and chosen.count(0) == 2 * PROBE_EVERY - 2


def test_probes_find_the_best_k_when_the_overhead_grows_with_k():
    """A round's overhead beyond the timed costs grows with K (the head's feed, verification), as on real
    pages: measured only at the K being run, it would be borrowed by the others.  Simulated rounds with the
    true times and seeded acceptance: the chooser must settle on the K of the best true rate."""
    costs = DraftCosts({1: 0.004, 8: 0.006}, 0.0005)
    conditional = [0.68, 0.69, 0.68, 0.78, 0.76, 0.75, 0.75]  # real pages' measured acceptance, roughly

    def true_round_s(k):
        return costs.round_s(k) + 0.0005 + 0.0015 * k

    chained = [1.0]
    for rate in conditional:
        chained.append(chained[-1] * rate)
    true_rates = [sum(chained[: k + 1]) / true_round_s(k) for k in range(MAX_DRAFTS + 1)]
    best = max(range(MAX_DRAFTS + 1), key=true_rates.__getitem__)
    assert 0 < best < MAX_DRAFTS  # a case where neither extreme wins
    auto = AutoDrafts(AutoDraftsPreset(acceptance=[0.93, 0.88, 0.81, 0.74, 0.71]), costs, "test")
    draw = random.Random(0)
    chosen = []
    for _ in range(3000):
        k = auto.choose()
        accepted = 0
        while accepted < k and draw.random() < conditional[accepted]:
            accepted += 1
        auto.observe_round(k, 1, true_round_s(k), [(k, accepted)] if k else [])
        chosen.append(k)
    assert auto.last.k == best
    assert chosen[-1000:].count(best) > 0.85 * 1000


@pytest.fixture(scope="module")
def band_images(tiny_preset):
    """Crops of different sizes, so prompts differ in length and sequences join a batch already under way."""
    page = next(iter_pages(open_document(SAMPLE_PDF), [1], tiny_preset.pixels)).image
    boxes = [(0, 0, 256, 64), (0, 64, 128, 96), (64, 0, 448, 192), (0, 128, 64, 160), (32, 32, 320, 320)]
    return [page.crop(box) for box in boxes]


@pytest.fixture(scope="module")
def predictable_engine(predictable_model_dir):
    return HFEngine(load_model_preset(predictable_model_dir))


@pytest.mark.parametrize("engine_name", ["hf_engine", "predictable_engine"])
def test_hf_auto_reads_what_plain_greedy_decoding_reads(request, engine_name, band_images):
    """One band at a time and batched: the random model (drafts rejected) and the predictable one (drafts
    always accepted); fp32 text equals drafts 0's.  Which K won depends on this machine's timings, so only
    what the rounds measured is checked here (the choice itself: the arithmetic tests above)."""
    engine = request.getfixturevalue(engine_name)
    plain = [engine.read(image, GenerationSettings(max_tokens=MAX_TOKENS)) for image in band_images]
    auto = GenerationSettings(max_tokens=MAX_TOKENS, drafts=AUTO_DRAFTS)
    alone = [engine.read(image, auto) for image in band_images]
    batched = dict(engine.read_many(enumerate(band_images), auto, concurrency=3))
    for index, expected in enumerate(plain):
        assert alone[index].token_ids == expected.token_ids and alone[index].text == expected.text
        assert batched[index].token_ids == expected.token_ids
        assert alone[index].metrics.drafts == AUTO_DRAFTS
    report = engine.auto_drafts_report()
    assert sum(report.rounds_by_k.values()) > 0 and sum(report.sequences_by_k.values()) == 2 * len(band_images)
    assert report.measured_acceptance  # no prior: the first rounds draft, so position 1 is measured
    if engine_name == "predictable_engine":
        assert set(report.measured_acceptance) == {1.0}
    else:
        assert report.measured_acceptance[0] < 0.2


class Schedule(AutoDrafts):
    """A chooser that goes through a fixed list of K, zeros included: whatever K each round gets, and
    however long the head's unseen pairs wait, the text must stay plain decoding's."""

    def __init__(self, engine, ks):
        super().__init__(engine.preset.auto_drafts, DraftCosts({1: 1.0, 2: 1.0}, 0.0), "schedule")
        self.ks = cycle(ks)

    def choose(self, batch: int = 1) -> int:
        return next(self.ks)


@pytest.mark.parametrize("ks", [[3, 0, 0, 2, 0, 5, 1, 7], [0, 0, 0, 0, 4]])
def test_any_sequence_of_k_reads_the_same_text(predictable_engine, band_images, ks):
    engine = predictable_engine
    plain = [engine.read(image, GenerationSettings(max_tokens=MAX_TOKENS)).token_ids for image in band_images]
    auto = GenerationSettings(max_tokens=MAX_TOKENS, drafts=AUTO_DRAFTS)
    decoder = engine._speculative_decoder()
    for image, expected in zip(band_images, plain):
        generation = decoder.generate(engine.page_inputs(image), auto, auto=Schedule(engine, ks))
        assert tuple(generation.token_ids[: len(expected)]) == expected
    from ocr_app.speculative.batched import BatchedDecoder

    batched = BatchedDecoder(engine.model, decoder.head, engine.stop_token_ids, AUTO_DRAFTS, Schedule(engine, ks))
    requests = ((index, engine.page_inputs(image)) for index, image in enumerate(band_images))
    for index, generation in batched.generate_many(requests, MAX_TOKENS, concurrency=3):
        assert tuple(generation.token_ids[: len(plain[index])]) == plain[index]


def test_drafts_values():
    assert parse_drafts("auto") == AUTO_DRAFTS and parse_drafts(" 3 ") == 3
    for bad in ("eight", "8", "-1", "2.5", ""):
        with pytest.raises(ConfigError, match="auto or a whole number 0-7"):
            parse_drafts(bad)
    with pytest.raises(ConfigError):
        GenerationSettings(max_tokens=4, drafts="eight")


runner = CliRunner()


def test_cli_reads_with_auto_and_says_the_k_it_chose(tiny_model_dir, tmp_path):
    out = tmp_path / "out.json"
    result = runner.invoke(read_app, [str(SAMPLE_PDF), "--model", str(tiny_model_dir), "--engine", "hf", "--drafts",
                                      "auto", "--pages", "1", "--max-tokens", "8", "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "drafts auto: K=" in result.stderr and "expected" in result.stderr
    page = json.loads(out.read_text())["pages"][0]
    assert page["metrics"]["drafts"] == AUTO_DRAFTS


def test_cli_rejects_a_bad_drafts_value_in_one_line(tiny_model_dir, tmp_path):
    result = runner.invoke(read_app, [str(SAMPLE_PDF), "--model", str(tiny_model_dir), "--drafts", "eight",
                                      "-o", str(tmp_path / "out.md")])
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: --drafts takes auto or a whole number 0-7, got 'eight'"
    assert not (tmp_path / "out.md").exists()


def test_vllm_auto_needs_recorded_costs_and_says_so_before_starting(tmp_path):
    preset = load_model_preset("ocr-tiny-tr")
    prior = preset.auto_drafts.acceptance  # the shipped head's held-out acceptance, falling with the position
    assert len(prior) == 5 and all(1 >= a > b > 0 for a, b in zip(prior, prior[1:])) and preset.auto_drafts.verify_cost is None
    with pytest.raises(ConfigError, match="fixed --drafts K"):
        fixed_choice(preset)
    from ocr_app.engines.vllm import VllmEngine

    with pytest.raises(ConfigError, match="no costs recorded"):  # before vLLM is imported or started
        VllmEngine(preset, AUTO_DRAFTS)
    result = runner.invoke(read_app, [str(SAMPLE_PDF), "--engine", "vllm", "--drafts", "auto",
                                      "-o", str(tmp_path / "out.md")])
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output + result.stderr


def test_vllm_auto_with_recorded_costs_picks_the_argmax_of_the_prior():
    preset = load_model_preset("ocr-tiny-tr")
    recorded = preset.auto_drafts.model_copy(update={"verify_cost": {1: 3.0, 2: 3.2, 4: 3.6, 8: 4.8}, "draft_cost": 0.4})
    k, report = fixed_choice(preset.model_copy(update={"auto_drafts": recorded}))
    acceptance = list(preset.auto_drafts.acceptance)
    acceptance += [acceptance[-1] * (acceptance[-1] / acceptance[-2]) ** n for n in range(1, 3)]  # the last ratio carried on
    costs = DraftCosts({1: 0.003, 2: 0.0032, 4: 0.0036, 8: 0.0048}, 0.0004)
    assert k == brute_force_k(acceptance, costs.verify, costs.draft_s)[0] == report.last.k
    assert "K fixed before the engine started" in "\n".join(report.markdown())


def test_presets_reject_bad_auto_drafts():
    with pytest.raises(ValueError):
        AutoDraftsPreset(acceptance=[0.5, 0.7])  # cannot grow with the position
    with pytest.raises(ValueError):
        AutoDraftsPreset(verify_cost={2: 1.0, 4: 1.2}, draft_cost=0.1)  # no T = 1
    with pytest.raises(ValueError):
        AutoDraftsPreset(verify_cost={1: 1.0, 2: 1.2})  # costs go together


@pytest.mark.parametrize("benchmark", ["tob", "real"])
def test_eval_reports_the_auto_section(tiny_model_dir, tmp_path, benchmark):
    out = tmp_path / "report"
    data = [str(TOB_MINI)] if benchmark == "tob" else [str(PROJECT_ROOT / "samples" / "real-tr"), "--renderings",
                                                       "born-digital"]
    done = subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.eval", benchmark, *data, "--model", str(tiny_model_dir),
         "--drafts", "0,auto", "--limit", "1", "--max-tokens", "6", "-o", str(out)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "## Drafts auto" in markdown and "| head, auto drafts |" in markdown and "**chosen**" in markdown
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert [check["identical_pages"] for check in report["unchanged_checks"]] == [1]
    auto = report["drafts_auto"]
    assert len(auto["last"]["expected_tokens_per_s"]) == MAX_DRAFTS + 1 and auto["rounds_by_k"]
