"""Measurements shared by the benchmark scripts (`benchmarks/bench_*_drafts.py`, `benchmarks/gpu_check.py`):
tok/s by number of drafts, and the cost of one main-model forward by tokens verified.

Every function prints its table and returns its figures; speedups are over drafts 0 in the same run.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from ocr_app.config import PROJECT_ROOT, ModelPreset
from ocr_app.documents import open_document
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.metrics import SpecDecodingStats
from ocr_app.pages import iter_pages
from ocr_app.speculative.costs import CALIBRATION_TOKENS, calibrate

SAMPLE_PDF = PROJECT_ROOT / "samples" / "fatura.pdf"


def page_images(preset: ModelPreset, count: int, pdf: Path = SAMPLE_PDF, dpi: int = 150):
    """`count` page images of the sample PDF fitted to the preset's budget, its pages repeated as needed."""
    document = open_document(pdf, None)
    numbers = list(range(1, document.page_count + 1))
    images = [page.image for page in iter_pages(document, numbers, preset.page_pixels, dpi)]
    return [images[i % len(images)] for i in range(count)]


@dataclass
class Figures:
    tokens_per_s: float
    pages_per_s: float
    spec: SpecDecodingStats | None


def merged_spec(pages) -> SpecDecodingStats | None:
    if pages[0].metrics.spec is None:
        return None
    total = SpecDecodingStats()
    for page in pages:
        total.merge(page.metrics.spec)
    return total


def timed(run, repeats: int) -> Figures:
    """Median wall time of `run()` (a list of PageText) over the repeats; the counters of the last run."""
    walls, pages = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        pages = run()
        walls.append(time.perf_counter() - started)
    wall = statistics.median(walls)
    tokens = sum(page.metrics.output_tokens for page in pages)
    return Figures(tokens / wall, len(pages) / wall, merged_spec(pages))


def format_row(label: str, drafts: int, figures: Figures, baseline: Figures) -> str:
    spec = figures.spec
    rates = " ".join(f"{rate:.2f}" for rate in spec.acceptance_rate_per_position) if spec else "-"
    mean_length = f"{spec.mean_acceptance_length:.2f}" if spec else "-"
    return (
        f"{label:<12} {drafts:>6} {figures.tokens_per_s:>9.1f} {figures.pages_per_s:>8.3f} "
        f"{figures.tokens_per_s / baseline.tokens_per_s:>7.2f}x {mean_length:>8}  {rates}"
    )


TABLE_HEADER = f"{'run':<12} {'drafts':>6} {'tok/s':>9} {'pages/s':>8} {'speedup':>8} {'mean AL':>8}  per-position acceptance"


def hf_drafts_table(engine, images, drafts: list[int], max_tokens: int, repeats: int, rollbacks: list[str]) -> dict:
    """tok/s of the hf engine reading `images` one at a time, for every K in `drafts` (K > 0 once per
    rollback), K values interleaved within a repeat so machine load hits all alike."""
    decoder = engine._speculative_decoder()
    runs = [(k, rollback) for k in drafts for rollback in (rollbacks if k else ["generate"])]
    walls: dict[tuple[int, str], list[float]] = {run: [] for run in runs}
    pages: dict[tuple[int, str], list] = {}
    engine.read(images[0], GenerationSettings(max_tokens=2, drafts=1))  # warm-up
    for _ in range(repeats):
        for k, rollback in runs:
            if k:
                decoder.rollback_name = rollback
            settings = GenerationSettings(max_tokens=max_tokens, drafts=k)
            started = time.perf_counter()
            pages[(k, rollback)] = [engine.read(image, settings) for image in images]
            walls[(k, rollback)].append(time.perf_counter() - started)
    figures = {}
    for run in runs:
        wall = statistics.median(walls[run])
        figures[run] = Figures(
            sum(page.metrics.output_tokens for page in pages[run]) / wall, len(images) / wall, merged_spec(pages[run])
        )
    baseline = figures[runs[0]]
    print(TABLE_HEADER)
    for (k, rollback), run_figures in figures.items():
        print(format_row(rollback, k, run_figures, baseline), flush=True)
    return figures


def hf_forward_cost(engine, image, repeats: int, token_counts=CALIBRATION_TOKENS) -> dict[int, float]:
    """Median ms of one verify pass over T new tokens after the page prompt, as a round of the engine's
    speculative decoder runs it (`speculative.costs.calibrate`, what `--drafts auto` times at start): what
    verifying K+1 tokens costs on this device."""
    costs = calibrate(engine._speculative_decoder(), engine.page_inputs(image), max(repeats, 5), token_counts)
    ms = {tokens: seconds * 1000 for tokens, seconds in costs.verify_s.items()}
    print("main-model forward, T tokens: " + ", ".join(f"T={t} {v:.2f} ms ({v / ms[1]:.2f}x)" for t, v in ms.items())
          + f"; head step {costs.draft_s * 1000:.2f} ms")
    return ms


def vllm_drafts_table(engine, images, drafts: list[int], max_tokens: int, concurrency: int, repeats: int) -> dict:
    """tok/s of the vLLM engine for every K in `drafts`: one page at a time (low latency) and all at
    once up to `concurrency` (bulk).  The engine restarts for each K."""
    figures = {}
    print(TABLE_HEADER)
    for k in drafts:
        settings = GenerationSettings(max_tokens=max_tokens, drafts=k)
        engine.read(images[0], settings)  # warm-up (and the restart for K)
        figures[(k, "low-latency")] = timed(lambda: [engine.read(image, settings) for image in images], repeats)
        figures[(k, "bulk")] = timed(
            lambda: [page for _, page in engine.read_many(enumerate(images), settings, concurrency)], repeats
        )
        for mode in ("low-latency", "bulk"):
            print(format_row(mode, k, figures[(k, mode)], figures[(drafts[0], mode)]), flush=True)
    return figures
