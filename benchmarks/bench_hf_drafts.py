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
import tempfile
from pathlib import Path

import torch

from ocr_app.benchmarking import SAMPLE_PDF, hf_drafts_table, hf_forward_cost
from ocr_app.config import load_model_preset
from ocr_app.documents import open_document, parse_page_range
from ocr_app.engines.hf import HFEngine
from ocr_app.pages import iter_pages
from ocr_app.speculative.cache import ROLLBACKS
from ocr_app.testing.tiny_model import build_tiny_model


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
            images = [page.image for page in iter_pages(document, parse_page_range(args.pages, document.page_count), preset.page_pixels)]
            print(f"\n== {model_dir.name}: {len(images)} pages, max {args.max_tokens} tokens, {args.repeats} repeats, "
                  f"{torch.get_num_threads()} threads, dtype {preset.hf_dtype}")
            hf_drafts_table(engine, images, list(range(8)), args.max_tokens, args.repeats, sorted(ROLLBACKS))
            hf_forward_cost(engine, images[0], args.repeats)


if __name__ == "__main__":
    main()
