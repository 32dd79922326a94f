"""`ocr-train-mtp`: train a model's MTP head by self-distillation on its own readings of your pages.

    ocr-train-mtp --model MODEL_DIR --data DOCS_DIR --output NEW_MODEL_DIR [--draft-steps 3] [--max-steps N]
                  [--init existing|fresh|PATH] [--resume]
    ocr-train-mtp --eval-only --model MODEL_DIR --data DOCS_DIR [--output TRAINED_DIR]
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer
from rich.console import Console
from tqdm import tqdm

from ocr_app.cli.common import report_errors
from ocr_app.engine_factory import quiet_libraries

app = typer.Typer(add_completion=False, help=__doc__.splitlines()[0])


@app.command()
def train_mtp(
    model: str = typer.Option(..., "--model", "-m", help="Model folder or preset whose head to train."),
    data: Path = typer.Option(None, "--data", help="Folder (or file) of documents: PDFs and images."),
    output: Path = typer.Option(..., "--output", "-o", help="New model folder to write (the input is copied)."),
    draft_steps: int = typer.Option(None, "--draft-steps", help="Chained draft steps to train (1-7; default 3)."),
    max_steps: int = typer.Option(None, "--max-steps", help="Stop after this many optimizer steps; only the pages they reach are read."),
    init: str = typer.Option("existing", "--init", help="Start from: existing (the model's head), fresh, or a head file PATH."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the work folder's checkpoint."),
    eval_only: bool = typer.Option(False, "--eval-only", help="Only evaluate the model's head (and --output's, if it exists)."),
    learning_rate: float = typer.Option(None, "--lr", help="Peak learning rate."),
    batch_size: int = typer.Option(None, "--batch-size", help="Pages per micro-batch."),
    grad_accum: int = typer.Option(None, "--grad-accum", help="Micro-batches per optimizer step."),
    temperature: float = typer.Option(None, "--temperature", help="Distillation temperature."),
    seed: int = typer.Option(None, "--seed", help="Seed of the split, the page order and a fresh head."),
    epochs: int = typer.Option(None, "--epochs", help="Passes over the training pages."),
    warmup_steps: int = typer.Option(None, "--warmup-steps", help="Learning-rate warmup steps (at most a tenth of the run)."),
    eval_pages: int = typer.Option(None, "--eval-pages", help="Held-out pages to evaluate on, at most."),
    eval_fraction: float = typer.Option(None, "--eval-fraction", help="Share of pages held out (whole documents)."),
    eval_positions: int = typer.Option(None, "--eval-positions", help="Draft positions to evaluate (1-7; default 7)."),
    config: Path = typer.Option(None, "--config", help="Training defaults (TOML); default configs/train_mtp.toml."),
    synth_pages: int = typer.Option(0, "--synth-pages", help="Also use this many synthetic pages (needs ocr_app.synth)."),
    engine: str = typer.Option("hf", "--engine", "-e", help="Engine that reads the pages: hf or vllm."),
    concurrency: int = typer.Option(None, "--concurrency", help="Pages in flight while reading (default: bulk mode's)."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Most tokens the model may write per page."),
    work_dir: Path = typer.Option(None, "--work-dir", help="Read cache and checkpoints (default OUTPUT.mtp-work)."),
    device: str = typer.Option(None, "--device", help="cpu or cuda (default: cuda when available)."),
    threads: int = typer.Option(None, "--threads", help="CPU threads for torch."),
    in_place: bool = typer.Option(False, "--in-place", help="Allow --output to be the input model folder."),
) -> None:
    with report_errors():
        from ocr_app.config import load_mode_preset, load_model_preset
        from ocr_app.train_mtp.config import load_train_config

        # Settings are checked before torch and transformers load, so a typo fails in a blink.
        train_config = load_train_config(
            config,
            draft_steps=draft_steps,
            max_steps=max_steps,
            learning_rate=learning_rate,
            batch_size=batch_size,
            grad_accum=grad_accum,
            temperature=temperature,
            seed=seed,
            epochs=epochs,
            warmup_steps=warmup_steps,
            eval_pages=eval_pages,
            eval_fraction=eval_fraction,
            eval_positions=eval_positions,
        )
        preset = load_model_preset(model)
        if max_tokens is not None:
            preset = preset.model_copy(update={"max_tokens": max_tokens})
        quiet_libraries()
        import torch

        from ocr_app.train_mtp.evaluate import print_report
        from ocr_app.train_mtp.run import Callbacks, TrainJob, evaluate_only, train

        if threads:
            torch.set_num_threads(threads)
        job = TrainJob(
            model=preset,
            output=output,
            config=train_config,
            data=data,
            synth_pages=synth_pages,
            init=init,
            resume=resume,
            engine=engine,
            concurrency=concurrency or load_mode_preset("bulk").concurrency,
            work_dir=work_dir,
            device=device,
            in_place=in_place,
            command=shlex.join(["ocr-train-mtp", *sys.argv[1:]]),
        )
        console = Console()
        bars: dict[str, tqdm] = {}

        def close_bars() -> None:
            for bar in bars.values():
                bar.close()

        def note(line: str) -> None:
            close_bars()
            print(line, file=sys.stderr)

        def start_bar(name: str, total: int, initial: int = 0, unit: str = "page") -> None:
            close_bars()
            bars[name] = tqdm(total=total, initial=initial, desc=name, unit=unit, file=sys.stderr, dynamic_ncols=True)

        def on_step(report) -> None:
            rates = "/".join(f"{100 * r:.0f}" for r in report.acceptance.acceptance_rates)
            bars["training"].set_postfix_str(f"loss {report.loss:.3f} accept% {rates} lr {report.learning_rate:.2e}")
            bars["training"].update(1)

        callbacks = Callbacks(
            on_note=note,
            on_reading=lambda total: start_bar("reading", total),
            on_read=lambda read: bars["reading"].update(1),
            on_training=lambda first, total: start_bar("training", total, first, unit="step"),
            on_step=on_step,
            on_evaluation=lambda evaluation: note(f"evaluated {evaluation.name} on {evaluation.pages} held-out pages"),
        )
        evaluations = evaluate_only(job, callbacks) if eval_only else train(job, callbacks)
        close_bars()
        print_report(evaluations, train_config.eval_positions, job.resolved_work_dir / "eval.json", console)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
