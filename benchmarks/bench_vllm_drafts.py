"""Throughput of the vLLM engine by number of MTP drafts, low-latency and bulk, side by side.

    python benchmarks/bench_vllm_drafts.py [--model build/tiny-predictable] [--pages 8] [--repeats 3]

The same pages are read for every K in --drafts (default 0,1,2,3,5): one page
at a time (low latency) and all at once up to --concurrency (bulk).  Each
figure is the median of --repeats runs after a warm-up page; speedups are over
K = 0 in the same run, and per-position acceptance comes from vLLM's counters.
Without --model the predictable tiny model (exact MTP head) is built offline
into build/tiny-predictable: it shows what acceptance buys, not what a real head
accepts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass

from ocr_app.config import PROJECT_ROOT, load_model_preset
from ocr_app.documents import open_document
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.engines.vllm import VllmEngine
from ocr_app.metrics import SpecDecodingStats
from ocr_app.pages import iter_pages

SAMPLE_PDF = PROJECT_ROOT / "samples" / "fatura.pdf"
PREDICTABLE_DIR = PROJECT_ROOT / "build" / "tiny-predictable"


@dataclass
class Figures:
    tokens_per_s: float
    pages_per_s: float
    spec: SpecDecodingStats | None


def page_images(preset, count: int):
    document = open_document(SAMPLE_PDF, None)
    numbers = list(range(1, document.page_count + 1))
    images = [page.image for page in iter_pages(document, numbers, preset.pixels, 150)]
    return [images[i % len(images)] for i in range(count)]


def merged_spec(pages) -> SpecDecodingStats | None:
    if pages[0].metrics.spec is None:
        return None
    total = SpecDecodingStats()
    for page in pages:
        total.merge(page.metrics.spec)
    return total


def timed(run, repeats: int) -> Figures:
    """Median wall time over the repeats; the counters of the last run."""
    walls, pages = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        pages = run()
        walls.append(time.perf_counter() - started)
    wall = statistics.median(walls)
    tokens = sum(page.metrics.output_tokens for page in pages)
    return Figures(tokens / wall, len(pages) / wall, merged_spec(pages))


def measure(engine: VllmEngine, images, settings: GenerationSettings, concurrency: int, repeats: int):
    engine.read(images[0], settings)  # warm-up
    low_latency = timed(lambda: [engine.read(image, settings) for image in images], repeats)
    bulk = timed(
        lambda: [page for _, page in engine.read_many(enumerate(images), settings, concurrency)], repeats
    )
    return low_latency, bulk


def format_row(drafts: int, mode: str, figures: Figures, baseline: Figures) -> str:
    spec = figures.spec
    rates = " ".join(f"{rate:.2f}" for rate in spec.acceptance_rate_per_position) if spec else "-"
    mean_length = f"{spec.mean_acceptance_length:.2f}" if spec else "-"
    return (
        f"{mode:<12} {drafts:>6} {figures.tokens_per_s:>9.1f} {figures.pages_per_s:>8.3f} "
        f"{figures.tokens_per_s / baseline.tokens_per_s:>7.2f}x {mean_length:>8}  {rates}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="preset name or model folder (default: predictable tiny model)")
    parser.add_argument("--drafts", default="0,1,2,3,5")
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (slower start)")
    args = parser.parse_args()

    if args.model is None:
        if not (PREDICTABLE_DIR / "config.json").exists():
            from ocr_app.testing.tiny_model import build_tiny_model

            build_tiny_model(PREDICTABLE_DIR, seed=1, predictable=True)
        args.model = str(PREDICTABLE_DIR)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    preset = load_model_preset(args.model)
    images = page_images(preset, args.pages)
    draft_counts = [int(k) for k in args.drafts.split(",")]

    print(
        f"model {preset.name}, {args.pages} pages, max {args.max_tokens} tokens, bulk concurrency {args.concurrency}, "
        f"median of {args.repeats} runs, {'compiled' if args.compile else 'eager'}"
    )
    print(f"{'mode':<12} {'drafts':>6} {'tok/s':>9} {'pages/s':>8} {'speedup':>8} {'mean AL':>8}  per-position acceptance")
    engine = VllmEngine(preset, drafts=draft_counts[0], enforce_eager=not args.compile)
    baseline: tuple[Figures, Figures] | None = None
    try:
        for drafts in draft_counts:
            settings = GenerationSettings(max_tokens=args.max_tokens, drafts=drafts)
            figures = measure(engine, images, settings, args.concurrency, args.repeats)
            baseline = baseline or figures
            for mode, mode_figures, mode_baseline in zip(("low-latency", "bulk"), figures, baseline):
                print(format_row(drafts, mode, mode_figures, mode_baseline), flush=True)
    finally:
        engine.close()

if __name__ == "__main__":
    main()
