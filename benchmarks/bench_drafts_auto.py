"""`--drafts auto` against every fixed K on real pages, side by side in one run: is auto within 5% of the best K?

    python benchmarks/bench_drafts_auto.py                       # 3 born-digital pages of samples/real-tr, 2 repeats
    python benchmarks/bench_drafts_auto.py --limit 6 --repeats 3 --model ocr-tiny-tr --max-k 5

The model (the shipped `ocr-tiny-tr` by default) reads `--limit` born-digital pages of samples/real-tr (spread
over the categories) on the hf engine as `ocr-read` does in the low-latency mode (one page, and one band, at a
time), with K = 0..max-k fixed and with auto; settings interleaved within each repeat so machine load hits all
alike, median wall time over the repeats (`benchmarking.hf_drafts_table`).  Auto's chooser is timed once
before (its start-up calibration, as an engine start, is not in any timing) and keeps what it learns over the
repeats, as it would over a run of that many pages.  Prints the table, auto's tok/s over the best fixed K's
(issue 24's target: at least 95%), the K auto chose and why, and the load average before and after: timings
are only as good as the machine is idle.
"""

from __future__ import annotations

import argparse
import os

from ocr_app.benchmarking import hf_drafts_table
from ocr_app.config import PROJECT_ROOT, load_model_preset
from ocr_app.engine_factory import make_engine
from ocr_app.engines.protocol import AUTO_DRAFTS, GenerationSettings
from ocr_app.realbench import BORN_DIGITAL, load_real_benchmark, select_real_pages

REAL_TR = PROJECT_ROOT / "samples" / "real-tr"
TARGET = 0.95  # auto's tok/s over the best fixed K's, issue 24


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ocr-tiny-tr", help="preset name, preset .toml or model folder")
    parser.add_argument("--limit", type=int, default=3, help="born-digital pages of samples/real-tr")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-k", type=int, default=5, help="fixed K compared: 0..max-k")
    parser.add_argument("--max-tokens", type=int, default=None, help="default: the preset's")
    args = parser.parse_args()
    print(f"load average before: {load_average()}", flush=True)
    preset = load_model_preset(args.model)
    pages = select_real_pages(load_real_benchmark(REAL_TR, (BORN_DIGITAL,)), limit=args.limit)
    images = [page.image(preset.page_pixels) for page in pages]
    max_tokens = args.max_tokens or preset.max_tokens
    engine = make_engine("hf", preset)
    engine.read(images[0], GenerationSettings(max_tokens=2, drafts=AUTO_DRAFTS))  # auto's calibration
    print(f"{preset.name}, hf {preset.hf_dtype}, {len(images)} pages ({', '.join(page.id for page in pages)}), "
          f"max {max_tokens} tokens, {args.repeats} repeats")
    figures = hf_drafts_table(engine, images, [*range(args.max_k + 1), AUTO_DRAFTS], max_tokens, args.repeats,
                              ["recorded"])
    fixed = {k: run for (k, _), run in figures.items() if k != AUTO_DRAFTS}
    best = max(fixed, key=lambda k: fixed[k].tokens_per_s)
    auto = next(run for (k, _), run in figures.items() if k == AUTO_DRAFTS)
    ratio = auto.tokens_per_s / fixed[best].tokens_per_s
    print(f"\nauto {auto.tokens_per_s:.1f} tok/s, best fixed K={best} {fixed[best].tokens_per_s:.1f} tok/s: "
          f"{100 * ratio:.1f}% ({'meets' if ratio >= TARGET else 'misses'} the {100 * TARGET:.0f}% target)")
    report = engine.auto_drafts_report()
    print(f"auto chose {report.k_summary}; last choice {report.last.why()}")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
