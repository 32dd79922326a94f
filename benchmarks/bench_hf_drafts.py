"""tok/s of the hf engine for drafts 0..7 on the same pages, side by side in one run.

    python benchmarks/bench_hf_drafts.py                     # builds the tiny random + predictable models
    python benchmarks/bench_hf_drafts.py --model DIR [--model DIR2] --pages 1-2 --max-tokens 64 --repeats 3

Per model: for every K, median tok/s over the repeats (K values interleaved within a repeat so
machine load hits all alike), speedup over drafts 0, mean acceptance length and per-position
acceptance; K > 0 runs with both cache rollbacks (recorded per-position states, snapshot+refeed).
Then the cost of one cached main-model forward over T = 1..8 tokens, the quantity that decides
what verifying K+1 tokens (or batching pages) costs on this machine.  A random-weight model
accepts ~nothing, so its speedups are below 1 by construction; the predictable model's head is
exact, so it shows the ceiling.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import DynamicCache

from ocr_app.config import load_model_preset
from ocr_app.documents import open_document, parse_page_range
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.engines.hf import HFEngine
from ocr_app.metrics import SpecDecodingStats
from ocr_app.pages import iter_pages
from ocr_app.speculative.cache import ROLLBACKS, attention_layers
from ocr_app.speculative.decoder import embed_prompt
from ocr_app.testing.tiny_model import build_tiny_model

SAMPLE_PDF = Path(__file__).resolve().parent.parent / "samples" / "fatura.pdf"


def read_pages(engine: HFEngine, images, settings: GenerationSettings) -> tuple[float, int, SpecDecodingStats]:
    wall, tokens, stats = 0.0, 0, SpecDecodingStats()
    for image in images:
        page = engine.read(image, settings)
        wall += page.metrics.wall_s
        tokens += page.metrics.output_tokens
        if page.metrics.spec is not None:
            stats.merge(page.metrics.spec)
    return wall, tokens, stats


def bench_drafts(engine: HFEngine, images, max_tokens: int, repeats: int) -> None:
    decoder = engine._speculative_decoder()
    runs = [(0, "generate")] + [(k, rollback) for k in range(1, 8) for rollback in sorted(ROLLBACKS)]
    rates: dict[tuple[int, str], list[float]] = {run: [] for run in runs}
    stats: dict[tuple[int, str], SpecDecodingStats] = {}
    read_pages(engine, images[:1], GenerationSettings(max_tokens=8, drafts=1))  # warm-up
    for _ in range(repeats):
        for drafts, rollback in runs:
            if drafts:
                decoder.rollback_name = rollback
            wall, tokens, run_stats = read_pages(engine, images, GenerationSettings(max_tokens=max_tokens, drafts=drafts))
            rates[(drafts, rollback)].append(tokens / wall)
            stats[(drafts, rollback)] = run_stats
    baseline = statistics.median(rates[(0, "generate")])
    print(f"{'K':>2} {'rollback':>9} {'tok/s':>8} {'speedup':>8} {'accept len':>10}  acceptance per position")
    for drafts, rollback in runs:
        rate = statistics.median(rates[(drafts, rollback)])
        run_stats = stats[(drafts, rollback)]
        per_position = " ".join(f"{r:.2f}" for r in run_stats.acceptance_rate_per_position)
        accept = f"{run_stats.mean_acceptance_length:.2f}" if drafts else "-"
        print(f"{drafts:>2} {rollback:>9} {rate:8.1f} {rate / baseline:8.2f} {accept:>10}  {per_position}")


@torch.inference_mode()
def bench_forward_cost(engine: HFEngine, image, repeats: int) -> None:
    """Median ms of one cached forward over T new tokens after the page prompt."""
    decoder = engine._speculative_decoder()
    prompt = embed_prompt(engine.model, engine._inputs(image))
    cache = DynamicCache(config=engine.model.config)
    decoder._forward(prompt.embeds, prompt.positions, cache)
    length = prompt.embeds.shape[1]
    costs = {}
    for tokens in (1, 2, 4, 8):
        embeds = decoder._embed(list(range(10, 10 + tokens)))
        positions = decoder._positions(length, tokens, prompt.rope_delta)
        samples = []
        for _ in range(max(repeats, 5)):
            started = time.perf_counter()
            decoder._forward(embeds, positions, cache)
            samples.append(time.perf_counter() - started)
            for layer in attention_layers(cache):  # keep the length fixed; linear states drift, the cost does not
                layer.crop(-tokens)
        costs[tokens] = statistics.median(samples) * 1000
    print("main-model forward, T tokens: " + ", ".join(f"T={t} {ms:.2f} ms ({ms / costs[1]:.2f}x)" for t, ms in costs.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, action="append", help="model folder (repeatable)")
    parser.add_argument("--pages", default="1-2", help="pages of samples/fatura.pdf")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        models = args.model or [
            build_tiny_model(Path(scratch) / "tiny-random", seed=0),
            build_tiny_model(Path(scratch) / "tiny-predictable", seed=1, predictable=True),
        ]
        document = open_document(SAMPLE_PDF)
        for model_dir in models:
            preset = load_model_preset(model_dir)
            engine = HFEngine(preset)
            images = [page.image for page in iter_pages(document, parse_page_range(args.pages, document.page_count), preset.pixels)]
            print(f"\n== {model_dir.name}: {len(images)} pages, max {args.max_tokens} tokens, {args.repeats} repeats, "
                  f"{torch.get_num_threads()} threads, dtype {preset.hf_dtype}")
            bench_drafts(engine, images, args.max_tokens, args.repeats)
            bench_forward_cost(engine, images[0], args.repeats)


if __name__ == "__main__":
    main()
