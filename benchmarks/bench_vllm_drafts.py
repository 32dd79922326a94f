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

from ocr_app.benchmarking import page_images, vllm_drafts_table
from ocr_app.config import PROJECT_ROOT, load_model_preset
from ocr_app.engines.vllm import VllmEngine

PREDICTABLE_DIR = PROJECT_ROOT / "build" / "tiny-predictable"


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
    engine = VllmEngine(preset, drafts=draft_counts[0], enforce_eager=not args.compile)
    try:
        vllm_drafts_table(engine, images, draft_counts, args.max_tokens, args.concurrency, args.repeats)
    finally:
        engine.close()


if __name__ == "__main__":
    main()
