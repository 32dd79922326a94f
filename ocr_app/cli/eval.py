"""`ocr-eval tob`: score the model on a TurkishOCR-Bench style set, prove drafting leaves the output unchanged, time it.

    ocr-eval tob samples/tob-mini --model tiny-random --drafts 0,1,3 --output reports/tob
    ocr-eval tob /data/tob --model qwen3.5-2b-ocr-tr --engine vllm --drafts 0,3,6 --concurrency 1,64 \
        --baseline tesseract --output reports/tob

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
from typing import Annotated, Optional

import typer
from tqdm import tqdm

from ocr_app.cli.common import ENGINE_HELP, MAX_TOKENS_HELP, MODEL_HELP, quiet_libraries, report_errors
from ocr_app.config import default_model_name, load_model_preset
from ocr_app.engine_factory import make_engine
from ocr_app.errors import OcrError
from ocr_app.evaluation import Evaluation, evaluate, prepare_images
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


@app.callback()
def _group() -> None:
    """Benchmarks for ocr_app."""


@app.command()
def tob(
    data: Annotated[str, typer.Argument(help="Benchmark: a folder of pages with a .md truth beside each (or metadata.jsonl), parquet/arrow files, or a hub dataset id.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Folder for report.md, report.json, report.png.")],
    model: Annotated[Optional[str], typer.Option(help=MODEL_HELP)] = None,
    engine: Annotated[str, typer.Option(help=ENGINE_HELP)] = "hf",
    drafts: Annotated[str, typer.Option(help="Draft counts K to compare, comma-separated, e.g. 0,3,6; 0 (the reference) is always run.")] = "0",
    concurrency: Annotated[str, typer.Option(help="Pages in flight, comma-separated, e.g. 1,64; every K is run at each.")] = "1",
    every: Annotated[int, typer.Option(help="Keep every Nth page of each category.")] = 1,
    limit: Annotated[Optional[int], typer.Option(help="At most this many pages, taken round-robin over the categories; default: all.")] = None,
    baseline: Annotated[Optional[str], typer.Option(help="Also score a classical OCR engine on the same pages: tesseract; default: none.")] = None,
    tolerance: Annotated[Optional[float], typer.Option(
        help="Largest allowed score change (points) between K=0 and K>0; default 0 for hf in fp32, else 0.1.")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(help=MAX_TOKENS_HELP)] = None,
    ignore_case: Annotated[bool, typer.Option(help="Score with Turkish case folding (İ/i, I/ı).")] = False,
) -> None:
    """Score, unchanged-output check and speed table on TurkishOCR-Bench style data."""
    with report_errors():
        draft_counts = sorted(set(parse_counts(drafts, "--drafts", 0)) | {0})
        concurrencies = parse_counts(concurrency, "--concurrency", 1)
        if baseline is not None and baseline not in BASELINES:
            raise OcrError(f"unknown baseline '{baseline}' (baselines: {', '.join(BASELINES)})")
        pages = select_pages(load_benchmark(data), every, limit)
        preset = load_model_preset(model or default_model_name())
        tolerance = default_tolerance(engine, preset.hf_dtype) if tolerance is None else tolerance
        if tolerance < 0:
            raise OcrError("--tolerance must be at least 0")
        tokens = max_tokens or preset.max_tokens
        scorer = make_scorer(ignore_case)
        images = prepare_images(pages, preset.pixels)
        quiet_libraries()
        started = time.perf_counter()
        reader = make_engine(engine, preset)
        engine_start_s = time.perf_counter() - started
        try:
            evaluation = _evaluate(reader, pages, images, draft_counts, concurrencies, tokens, scorer, tolerance,
                                   preset.retry)
        finally:
            reader.close()
        baseline_result, skipped = _run_baseline(baseline, pages, scorer) if baseline else (None, None)
        info = {
            "data": data,
            "model": preset.name,
            "model_path": str(preset.resolved_path()),
            "engine": engine,
            "engine_start_s": round(engine_start_s, 3),
            "pages": len(pages),
            "categories": len({page.category for page in pages}),
            "every": every,
            "limit": limit,
            "drafts": draft_counts,
            "concurrency": concurrencies,
            "max_tokens": tokens,
            "tolerance": tolerance,
            "ignore_case": ignore_case,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }
        paths = write_reports(output, evaluation, info, baseline_result, skipped)
        sys.stdout.write(paths[0].read_text(encoding="utf-8"))
        print(f"wrote {', '.join(str(path) for path in paths)}", file=sys.stderr)
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
