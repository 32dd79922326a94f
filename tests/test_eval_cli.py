"""`ocr-eval tob`: real runs of the tiny model, the unchanged check, the reports and the Tesseract baseline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ocr_app.baselines import tesseract
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.engines.protocol import PageText
from ocr_app.evaluation import NEAR_TIE_GAP, Evaluation, Run, compare_runs, evaluate, first_difference, prepare_images, read_run
from ocr_app.metrics import PageMetrics, RunMetrics
from ocr_app.reports import render_markdown
from ocr_app.scoring import make_scorer, summarize
from ocr_app.synth import make_sample
from ocr_app.tob import load_benchmark, select_pages
from tests.vllm_support import VLLM_TEST_ENV

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TOB_MINI = PROJECT_ROOT / "samples" / "tob-mini"


@pytest.fixture(scope="module")
def two_pages(tiny_preset):
    pages = select_pages(load_benchmark(TOB_MINI), limit=2)
    return pages, prepare_images(pages, tiny_preset.pixels)


def test_first_difference():
    assert first_difference("abcdef", "abcXef") == 3
    assert first_difference("abc", "abcdef") == 3
    assert first_difference("same", "same") == 4


def test_repeated_runs_are_identical_and_pass(hf_engine, two_pages):
    pages, images = two_pages
    evaluation = evaluate(hf_engine, pages, images, [0], [1, 2], 3, make_scorer(), 0.0)
    assert [(run.drafts, run.concurrency) for run in evaluation.runs] == [(0, 1), (0, 2)]
    assert [row.speedup for row in evaluation.speed] == [1.0, 1.0]
    check = compare_runs(evaluation.runs[0], evaluation.runs[1], tolerance=0.0)
    assert check.passed and check.identical_pages == 2 and not check.differences


@pytest.fixture(scope="module")
def predictable_engine(predictable_model_dir):
    from ocr_app.config import load_model_preset
    from ocr_app.engines.hf import HFEngine

    return HFEngine(load_model_preset(predictable_model_dir))


def test_changed_output_is_located_and_fails_the_gate(predictable_engine, two_pages):
    """Outputs cut at 4 tokens against the full 8-token outputs: real differences, located exactly.

    The predictable model writes varied tokens (the random one mostly writes whitespace, which scoring ignores).
    """
    hf_engine = predictable_engine
    pages, images = two_pages
    categories = {page.id: page.category for page in pages}
    full = read_run(hf_engine, images, categories, {p.id: "" for p in pages}, GenerationSettings(8), 1, make_scorer())
    references = {page_id: output.text for page_id, output in full.outputs.items()}  # the full text scores 100
    full = read_run(hf_engine, images, categories, references, GenerationSettings(8), 1, make_scorer())
    cut = read_run(hf_engine, images, categories, references, GenerationSettings(4), 1, make_scorer())
    assert full.summary.category_mean.similarity == 100.0
    check = compare_runs(full, cut, tolerance=0.0)
    longer = [page_id for page_id, output in full.outputs.items() if len(output.token_ids) > 4]
    assert longer, "the tiny model should write more than 4 tokens"
    assert sorted(d.page_id for d in check.differences) == sorted(longer)
    assert all(d.token_index == 4 for d in check.differences)
    for difference in check.differences:
        expected, got = full.outputs[difference.page_id].text, cut.outputs[difference.page_id].text
        assert difference.char_index == len(got) and expected.startswith(got)
    assert check.score < 100.0 and not check.passed
    assert compare_runs(full, cut, tolerance=100.0).passed


def _crafted_run(drafts: int, readings: dict[str, tuple[str, list[float], bool]]) -> Run:
    """A run from given readings: page id -> (text, top-2 gap per character token, re-read after a loop)."""
    scorer = make_scorer()
    outputs = {
        page_id: PageText(text, tuple(map(ord, text)), PageMetrics(1, len(text), 1.0, "stop", drafts, retried=retried),
                          top2_gaps=tuple(gaps))
        for page_id, (text, gaps, retried) in readings.items()
    }
    scores = {page_id: scorer(output.text, "Fatura No 12") for page_id, output in outputs.items()}
    return Run(drafts, 1, outputs, scores, summarize(("c", score) for score in scores.values()), RunMetrics())


def test_differences_show_the_top2_gap_and_sampled_re_reads_apart():
    """Crafted readings: a near-tie, a wide gap (a bug's sign) and a page re-read sampled after a loop."""
    reference = _crafted_run(0, {
        "tie": ("Fatura No 12", [3.0] * 7 + [0.02, 1.0, 1.0, 1.0, 1.0], False),
        "wide": ("Fatura No 12", [3.0] * 12, False),
        "looped": ("Fatura No 12", [3.0] * 12, True),
        "same": ("Fatura No 12", [3.0] * 12, False),
    })
    drafted = _crafted_run(3, {
        "tie": ("Fatura Mo 12", [3.0] * 7 + [0.05, 1.0, 1.0, 1.0, 1.0], False),
        "wide": ("Fatura No 13", [3.0] * 11 + [2.5], False),
        "looped": ("Fatura No 1", [3.0] * 11, False),
        "same": ("Fatura No 12", [2.9] * 12, False),
    })
    check = compare_runs(reference, drafted, tolerance=100.0, lossless=False)
    found = {d.page_id: d for d in check.differences}
    assert sorted(found) == ["looped", "tie", "wide"] and check.retried_pages == 1
    assert (found["tie"].token_index, found["tie"].reference_gap, found["tie"].drafted_gap) == (7, 0.02, 0.05)
    assert found["tie"].near_tie and not found["wide"].near_tie and found["wide"].reference_gap == 3.0
    assert found["looped"].retried and found["looped"].drafted_gap is None  # the drafted reading ended there
    assert NEAR_TIE_GAP > 0.05

    evaluation = Evaluation(runs=[reference, drafted], checks=[check], speed=[], pages=[])
    info = {"model": "m", "engine": "vllm", "pages": 4, "categories": 1, "data": "d", "engine_start_s": 0.0,
            "max_tokens": 12}
    markdown = render_markdown(evaluation, info, None, None)
    crafted, sampled = markdown.split("## Pages re-read sampled")
    assert "`tie`: first differs at character 7 (token 7), top-2 gap 0.020 / 0.050 (near-tie)" in crafted
    assert "`wide`: first differs at character 11 (token 11), top-2 gap 3.000 / 2.500:" in crafted
    assert "`looped`" in sampled and "`looped`" not in crafted
    assert "1 page(s) ran into a repetition loop and were read again sampled" in markdown


def _eval(args: list[str], tmp_path: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.eval", "tob", *args],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env=environment,
    )


def test_cli_writes_the_three_reports(tiny_model_dir, tmp_path):
    out = tmp_path / "report"
    done = _eval([str(TOB_MINI), "--model", str(tiny_model_dir), "--drafts", "0", "--limit", "2",
                  "--max-tokens", "6", "--baseline", "tesseract", "-o", str(out)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert {p.name for p in out.iterdir()} == {"report.md", "report.json", "report.png"}
    assert "| No MTP | 1 |" in done.stdout
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["info"]["pages"] == 2 and report["info"]["engine_start_s"] > 0
    assert len(report["pages"]) == 2 and "text" in report["pages"][0]["runs"][0]
    assert report["speed"][0]["speedup"] == 1.0 and report["speed"][0]["tokens_per_s"] > 0
    if tesseract.unavailable_reason() is None:
        assert report["baseline"]["score"]["pages"] == 2
    else:
        assert "baseline skipped" in done.stderr and report["baseline_skipped"]
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_bad_input_is_one_line(tmp_path):
    done = _eval([str(tmp_path / "yok"), "-o", str(tmp_path / "r")], tmp_path)
    assert done.returncode == 1 and done.stderr.strip().startswith("error:") and "Traceback" not in done.stderr
    done = _eval([str(TOB_MINI), "--drafts", "0,x", "-o", str(tmp_path / "r")], tmp_path)
    assert done.returncode == 1 and "--drafts" in done.stderr


def test_cli_with_drafts_keeps_output_unchanged(tiny_model_dir, tmp_path):
    out = tmp_path / "report"
    done = _eval([str(TOB_MINI), "--model", str(tiny_model_dir), "--drafts", "0,1,3", "--limit", "1",
                  "--max-tokens", "6", "-o", str(out)], tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert [check["identical_pages"] for check in report["unchanged_checks"]] == [1, 1]
    assert [len(row["acceptance_per_position"]) for row in report["speed"]] == [0, 1, 3]


def test_tesseract_skip_reason_when_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "not installed" in tesseract.unavailable_reason()


@pytest.mark.skipif(tesseract.unavailable_reason() is not None, reason="tesseract with Turkish data not installed")
def test_tesseract_reads_a_clean_turkish_letter():
    sample = make_sample(3, level="page", kind="letter", degradation="clean")
    run = tesseract.read_pages([("letter", sample.image)])
    assert make_scorer()(run.texts["letter"], sample.markdown).similarity > 85


def test_cli_on_vllm_keeps_output_unchanged_with_an_exact_head(predictable_model_dir, tmp_path):
    out = tmp_path / "report"
    done = _eval([str(TOB_MINI), "--model", str(predictable_model_dir), "--engine", "vllm", "--drafts", "0,1,3",
                  "--concurrency", "1,4", "--limit", "2", "--max-tokens", "8", "-o", str(out)], tmp_path,
                 env=VLLM_TEST_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    assert {p.name for p in out.iterdir()} == {"report.md", "report.json", "report.png"}
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    # K = 1 and 3, each at concurrency 1 and 4, against K = 0 at the same concurrency
    assert [check["identical_pages"] for check in report["unchanged_checks"]] == [2, 2, 2, 2]
    drafting = [row for row in report["speed"] if row["acceptance_per_position"]]
    assert len(drafting) == 4 and all(row["acceptance_per_position"][0] == 1.0 for row in drafting)
