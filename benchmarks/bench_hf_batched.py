"""Pages/s and bands/s of the hf engine reading pages one band at a time vs many bands per forward.

    python benchmarks/bench_hf_batched.py                       # shipped model, fatura.pdf + 4 tob-mini pages
    python benchmarks/bench_hf_batched.py --drafts 0 --drafts 3 --concurrency 16 --concurrency 64 --repeats 3

The engine is built as `ocr-read` builds it (bands, re-reads); concurrency 1 is the sequential
`read_many` (one band after another), higher values `BatchedDecoder` with that many bands in each
forward.  Runs are interleaved within a repeat so machine load hits all alike; the figures are
medians.  Each batched run's texts are compared with the sequential run's of the same drafts.  Beside
wall time, the process's CPU seconds: on a shared machine they show the work, whatever the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from ocr_app.config import default_model_name, load_model_preset
from ocr_app.documents import open_document
from ocr_app.engine_factory import make_engine
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.pages import iter_pages
from ocr_app.regions import page_regions

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
DEFAULT_PAGES = ("fatura.pdf", "tob-mini/invoice/invoice-01.jpg", "tob-mini/letter/letter-01.jpg",
                 "tob-mini/receipt/receipt-01.jpg", "tob-mini/form/form-01.jpg")


def load_images(names: list[str], preset) -> list:
    images = []
    for name in names:
        document = open_document(SAMPLES / name)
        images += [page.image for page in iter_pages(document, list(range(1, document.page_count + 1)), preset.page_pixels)]
    return images


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model preset or folder (default: the shipped model)")
    parser.add_argument("--page", action="append", help=f"document under samples/ (repeatable; default {DEFAULT_PAGES})")
    parser.add_argument("--drafts", type=int, action="append", help="K (repeatable; default 0 and 3)")
    parser.add_argument("--concurrency", type=int, action="append", help="bands per forward (repeatable; default 1, 16, 64)")
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    preset = load_model_preset(args.model or default_model_name())
    engine = make_engine("hf", preset)
    images = load_images(args.page or list(DEFAULT_PAGES), preset)
    bands = sum(len(band.images) - band.images.count(None)
                for image in images for band in page_regions(image, preset.regions, preset.pixels)) \
        if preset.regions is not None else len(images)
    drafts_list = args.drafts or [0, 3]
    concurrencies = sorted(set(args.concurrency or [1, 16, 64]) | {1})
    max_tokens = args.max_tokens or preset.max_tokens
    load = os.getloadavg()
    print(f"{preset.name}: {len(images)} pages, {bands} bands (cells and chunks counted), {torch.get_num_threads()} threads, "
          f"dtype {preset.hf_dtype}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    walls: dict[tuple[int, int], list[float]] = {}
    cpus: dict[tuple[int, int], list[float]] = {}
    texts: dict[tuple[int, int], list[str]] = {}
    engine.read_many([(0, images[0])], GenerationSettings(max_tokens=4), 2)  # warm-up
    for _ in range(args.repeats):
        for drafts in drafts_list:
            settings = GenerationSettings(max_tokens=max_tokens, drafts=drafts)
            for concurrency in concurrencies:
                started, cpu_started = time.perf_counter(), time.process_time()
                pages = dict(engine.read_many(list(enumerate(images)), settings, concurrency))
                walls.setdefault((drafts, concurrency), []).append(time.perf_counter() - started)
                cpus.setdefault((drafts, concurrency), []).append(time.process_time() - cpu_started)
                texts[(drafts, concurrency)] = [pages[index].text for index in range(len(images))]
    print(f"{'K':>2} {'bands/fwd':>9} {'pages/s':>8} {'bands/s':>8} {'speedup':>8} {'CPU s':>7} {'CPU speedup':>11}  "
          "same text as sequential")
    for drafts in drafts_list:
        baseline, cpu_baseline = statistics.median(walls[(drafts, 1)]), statistics.median(cpus[(drafts, 1)])
        for concurrency in concurrencies:
            wall, cpu = statistics.median(walls[(drafts, concurrency)]), statistics.median(cpus[(drafts, concurrency)])
            same = sum(a == b for a, b in zip(texts[(drafts, concurrency)], texts[(drafts, 1)], strict=True))
            print(f"{drafts:>2} {concurrency:>9} {len(images) / wall:8.3f} {bands / wall:8.2f} {baseline / wall:8.2f} "
                  f"{cpu:7.1f} {cpu_baseline / cpu:11.2f}  {same}/{len(images)} pages")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
