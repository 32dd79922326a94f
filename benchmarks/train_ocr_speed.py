"""Training speed of candidate OCR recipes on this machine: median seconds per step, samples/s.

    python benchmarks/train_ocr_speed.py [--steps 6] [--levels word line]

Each candidate is the shipped recipe (configs/train_ocr.toml) with one change;
all are timed in one run, side by side, on the same batches.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from ocr_app.cli.train_ocr import DEFAULT_CONFIG
from ocr_app.engine_factory import quiet_libraries
from ocr_app.synth import LEVELS
from ocr_app.train_ocr.config import Stage, load_train_config
from ocr_app.train_ocr.data import draw_examples
from ocr_app.train_ocr.trainer import Trainer

SIX_LAYERS = ("linear_attention", "linear_attention", "full_attention") * 2


def candidates(base):
    six = dataclasses.replace(base.model, num_hidden_layers=6, layer_types=SIX_LAYERS)
    return {
        "recipe (4 layers LFFF, bf16)": base,
        "recipe in fp32": base.model_copy(update={"bf16": False}),
        "6 layers LLFLLF, bf16": base.model_copy(update={"model": six}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--levels", nargs="+", default=["word", "line"], choices=LEVELS)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    quiet_libraries()
    base = load_train_config(DEFAULT_CONFIG)
    print(f"{'candidate':32} {'level':6} {'s/step':>7} {'samples/s':>9}")
    for name, config in candidates(base).items():
        with tempfile.TemporaryDirectory() as run_dir:
            trainer = Trainer(config, Path(run_dir), "benchmark")
            for level in args.levels:
                stage = Stage(steps=1, levels={level: 1.0}, batch_size=args.batch_size)
                times = []
                for step in range(args.steps + 1):  # the first step warms up
                    examples = draw_examples(step * args.batch_size, args.batch_size, stage)
                    started = time.perf_counter()
                    trainer.train_step(examples)
                    times.append(time.perf_counter() - started)
                median = statistics.median(times[1:])
                print(f"{name:32} {level:6} {median:7.2f} {args.batch_size / median:9.1f}", flush=True)


if __name__ == "__main__":
    main()
