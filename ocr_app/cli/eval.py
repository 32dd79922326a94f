"""`ocr-eval tob`: score the model on a TurkishOCR-Bench style set, prove drafting leaves the output unchanged, time it.
`ocr-eval real`: the same runs on real documents scored against their own PDF text layer (`ocr_app.realbench`).

    ocr-eval tob samples/tob-mini --model tiny-random --drafts 0,1,3,auto --output reports/tob
    ocr-eval tob /data/tob --model qwen3.5-2b-ocr-tr --engine vllm --drafts 0,3,6 --concurrency 1,64 \
        --baseline tesseract --output reports/tob
    ocr-eval real samples/real-tr --baseline tesseract --output reports/real

Writes report.md, report.json and report.png into the output folder and prints
the Markdown report.  Exit codes: 0 all checks passed, 1 bad input or setup,
3 the score with drafts moved from the score without by more than --tolerance.
"""

from __future__ import annotations

import datetime as dt
import platform
import sys
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Annotated, Optional

import typer
from tqdm import tqdm

from ocr_app.cli.common import ENGINE_HELP, MAX_TOKENS_HELP, MODEL_HELP, report_errors
from ocr_app.config import ModelPreset, default_model_name, load_model_preset
from ocr_app.engine_factory import make_engine, quiet_libraries
from ocr_app.engines.protocol import Drafts, parse_drafts
from ocr_app.errors import OcrError
from ocr_app.evaluation import Evaluation, draft_order, evaluate, prepare_images
from ocr_app.real_report import readers_of, score_reader, write_real_reports
from ocr_app.realbench import RENDERINGS, load_real_benchmark, select_real_pages, text_layer_scorer
from ocr_app.reports import BaselineResult, write_reports
from ocr_app.scoring import Scorer, make_scorer, summarize
from ocr_app.tob import BenchmarkPage, load_benchmark, select_pages

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help="Benchmarks for ocr_app.")
BASELINES = ("tesseract",)
EXIT_OUTPUT_CHANGED = 3


def parse_counts(text: str, option: str, minimum: int) -> list[int]:
    """`0,3,5` -> [0, 3, 5], duplicates dropped, order kept."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise OcrError(f"{option} takes comma-separated whole numbers, got '{text}'") from None
    if not values or any(value < minimum for value in values):
        raise OcrError(f"{option} needs numbers of at least {minimum}, got '{text}'")
    return list(dict.fromkeys(values))


def default_tolerance(engine: str, hf_dtype: str) -> float:
    """Exact equality where the arithmetic allows it: the hf engine in fp32 verifies drafts with the same
    numbers as plain decoding.  bf16 and vLLM's batched kernels round differently with the batch shape,
    which can flip a near-tie token; 0.1 points is below the published figures' precision."""
    return 0.0 if engine == "hf" and hf_dtype == "float32" else 0.1


# Options `tob` and `real` share.
Output = Annotated[Path, typer.Option("-o", "--output", help="Folder for report.md, report.json, report.png.")]
ModelOption = Annotated[Optional[str], typer.Option("--model", help=MODEL_HELP)]
EngineOption = Annotated[str, typer.Option("--engine", help=ENGINE_HELP)]
Drafts = Annotated[str, typer.Option("--drafts", help=(
    "Draft counts K to compare, comma-separated, e.g. 0,3,6,auto (auto: K chosen from measured acceptance and "
    "costs); 0 (the reference) is always run."))]
Concurrency = Annotated[str, typer.Option("--concurrency", help=(
    "Pages in flight, comma-separated, e.g. 1,64; every K is run at each."))]
Every = Annotated[int, typer.Option("--every", help="Keep every Nth page of each category.")]
Baseline = Annotated[Optional[str], typer.Option("--baseline", help=(
    "Also score a classical OCR engine on the same pages: tesseract; default: none."))]
Tolerance = Annotated[Optional[float], typer.Option("--tolerance", help=(
    "Largest allowed score change (points) between K=0 and K>0; default 0 for hf in fp32, else 0.1."))]
MaxTokens = Annotated[Optional[int], typer.Option("--max-tokens", help=MAX_TOKENS_HELP)]


@app.callback()
def _group() -> None:
    """Benchmarks for ocr_app."""


@app.command()
def tob(
    data: Annotated[str, typer.Argument(help="Benchmark: a folder of pages with a .md truth beside each (or metadata.jsonl), parquet/arrow files, or a hub dataset id.")],
    output: Output,
    model: ModelOption = None,
    engine: EngineOption = "hf",
    drafts: Drafts = "0",
    concurrency: Concurrency = "1",
    every: Every = 1,
    limit: Annotated[Optional[int], typer.Option(help="At most this many pages, taken round-robin over the categories; default: all.")] = None,
    baseline: Baseline = None,
    tolerance: Tolerance = None,
    max_tokens: MaxTokens = None,
    ignore_case: Annotated[bool, typer.Option(help="Score with Turkish case folding (İ/i, I/ı).")] = False,
) -> None:
    """Score, unchanged-output check and speed table on TurkishOCR-Bench style data."""
    with report_errors():
        run = _model_run(model, engine, drafts, concurrency, baseline, tolerance, max_tokens)
        pages = select_pages(load_benchmark(data), every, limit)
        scorer = make_scorer(ignore_case)
        evaluation, engine_start_s = _read_with_model(run, pages, scorer)
        baseline_result, skipped = _run_baseline(baseline, pages, scorer) if baseline else (None, None)
        info = {
            "data": data,
            **run.info(engine_start_s),
            "pages": len(pages),
            "categories": len({page.category for page in pages}),
            "every": every,
            "limit": limit,
            "ignore_case": ignore_case,
            **_machine(),
        }
        paths = write_reports(output, evaluation, info, baseline_result, skipped)
        _print_report(paths)
    _exit_if_changed(evaluation, run.tolerance)


@app.command()
def real(
    data: Annotated[Path, typer.Argument(help="Real-document benchmark folder with its sources.toml (samples/real-tr).")],
    output: Output,
    model: ModelOption = None,
    engine: EngineOption = "hf",
    drafts: Drafts = "0",
    concurrency: Concurrency = "1",
    renderings: Annotated[str, typer.Option(help="Comma-separated: born-digital, scanned.")] = ",".join(RENDERINGS),
    categories: Annotated[Optional[str], typer.Option(help="Only these categories, comma-separated.")] = None,
    every: Every = 1,
    limit: Annotated[Optional[int], typer.Option(help="At most this many pages per rendering, spread over the categories.")] = None,
    baseline: Baseline = None,
    tolerance: Tolerance = None,
    max_tokens: MaxTokens = None,
) -> None:
    """Word F1 and CERs against each page's PDF text layer, born-digital and scanned, model beside the baseline."""
    with report_errors():
        run = _model_run(model, engine, drafts, concurrency, baseline, tolerance, max_tokens)
        chosen = _names(renderings)
        pages = select_real_pages(load_real_benchmark(data, chosen, categories and _names(categories)), every, limit)
        evaluation, engine_start_s = _read_with_model(run, pages, text_layer_scorer)
        readers = readers_of(evaluation, pages)
        baseline_result, skipped = _run_baseline(baseline, pages, text_layer_scorer) if baseline else (None, None)
        info = {"data": str(data), **run.info(engine_start_s), "pages": len(pages), "renderings": list(chosen),
                "categories": sorted({page.category for page in pages}),
                "every": every, "limit": limit, **_machine()}
        if baseline_result is not None:
            readers.append(score_reader(baseline_result.name, pages, baseline_result.texts))
            info["baseline_wall_s"] = round(baseline_result.wall_s, 3)
        paths = write_real_reports(output, evaluation, pages, readers, info, skipped)
        _print_report(paths)
    _exit_if_changed(evaluation, run.tolerance)


@dataclass(frozen=True)
class _ModelRun:
    """The model side of an evaluation, as the options give it."""

    preset: ModelPreset
    engine: str
    draft_counts: list[Drafts]
    concurrencies: list[int]
    tolerance: float
    max_tokens: int

    def info(self, engine_start_s: float) -> dict:
        return {
            "model": self.preset.name,
            "model_path": str(self.preset.resolved_path()),
            "engine": self.engine,
            "engine_start_s": round(engine_start_s, 3),
            "drafts": self.draft_counts,
            "concurrency": self.concurrencies,
            "max_tokens": self.max_tokens,
            "tolerance": self.tolerance,
        }


def _model_run(model, engine, drafts, concurrency, baseline, tolerance, max_tokens) -> _ModelRun:
    draft_counts = draft_order(parse_drafts(part) for part in drafts.split(",") if part.strip())
    concurrencies = parse_counts(concurrency, "--concurrency", 1)
    if baseline is not None and baseline not in BASELINES:
        raise OcrError(f"unknown baseline '{baseline}' (baselines: {', '.join(BASELINES)})")
    preset = load_model_preset(model or default_model_name())
    tolerance = default_tolerance(engine, preset.hf_dtype) if tolerance is None else tolerance
    if tolerance < 0:
        raise OcrError("--tolerance must be at least 0")
    return _ModelRun(preset, engine, draft_counts, concurrencies, tolerance, max_tokens or preset.max_tokens)


def _read_with_model(run: _ModelRun, pages: list[BenchmarkPage], scorer: Scorer) -> tuple[Evaluation, float]:
    """Every page at every K and concurrency (`evaluation.evaluate`), and the engine's start time."""
    images = prepare_images(pages, run.preset.page_pixels)
    quiet_libraries()
    started = time.perf_counter()
    reader = make_engine(run.engine, run.preset)
    engine_start_s = time.perf_counter() - started
    try:
        evaluation = _evaluate(reader, pages, images, run.draft_counts, run.concurrencies, run.max_tokens, scorer,
                               run.tolerance, run.preset.retry)
    finally:
        reader.close()
    return evaluation, engine_start_s


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _machine() -> dict:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _print_report(paths: list[Path]) -> None:
    sys.stdout.write(paths[0].read_text(encoding="utf-8"))
    print(f"wrote {', '.join(str(path) for path in paths)}", file=sys.stderr)


def _exit_if_changed(evaluation: Evaluation, tolerance: float) -> None:
    failed = [check for check in evaluation.checks if not check.passed]
    if failed:
        worst = max(failed, key=lambda check: abs(check.score_delta))
        print(f"output changed: score moved by {worst.score_delta:+.3f} with {worst.drafts} drafts at concurrency "
              f"{worst.concurrency} (tolerance {tolerance})", file=sys.stderr)
        raise typer.Exit(EXIT_OUTPUT_CHANGED)


def _evaluate(reader, pages, images, draft_counts, concurrencies, tokens, scorer, tolerance, retry) -> Evaluation:
    total = len(images) * len(draft_counts) * len(concurrencies)
    with tqdm(total=total, unit="page", desc="reading", file=sys.stderr, disable=None, leave=False) as bar:
        def on_page(label: str, done: int) -> None:
            bar.set_postfix_str(label, refresh=False)
            bar.update()

        return evaluate(reader, pages, images, draft_counts, concurrencies, tokens, scorer, tolerance, on_page, retry)


def _run_baseline(name: str, pages: list[BenchmarkPage], scorer: Scorer) -> tuple[BaselineResult | None, str | None]:
    from ocr_app.baselines import tesseract

    reason = tesseract.unavailable_reason()
    if reason is not None:
        print(f"baseline skipped: {reason}", file=sys.stderr)
        return None, reason
    run = tesseract.read_pages((page.id, page.image()) for page in pages)
    scores = {page.id: scorer(run.texts[page.id], page.reference) for page in pages}
    summary = summarize((page.category, scores[page.id]) for page in pages)
    return BaselineResult(run.version, run.texts, scores, summary, run.wall_s), None


def main() -> None:
    app()


if __name__ == "__main__":
    main()
