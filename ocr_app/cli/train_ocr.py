"""`ocr-train-ocr`: train the small Turkish OCR model, or export a checkpoint as a model folder.

    ocr-train-ocr train --output runs/ocr [--config configs/train_ocr.toml] [--max-steps N] [--max-minutes M]
                        [--warm-start ocr_app/models/ocr-tiny-tr]
    ocr-train-ocr export --output runs/ocr --to ocr_app/models/ocr-tiny-tr [--regions configs/train_ocr.toml]
    ocr-train-ocr evaluate --output runs/ocr [--level word --level line] [--samples 32]
    ocr-train-ocr reliance --output runs/ocr [--level block] [--samples 16]

`train` resumes from the checkpoint in `--output` when there is one (with the
checkpoint's own recipe unless --config is given), else from `--warm-start MODEL_DIR`
(an exported folder: its weights and step count, a fresh optimizer) when given; `--max-steps` is the total
step count to reach, `--max-minutes` this session's wall time. SIGTERM/Ctrl-C
save a checkpoint before stopping. The same command runs on a GPU unchanged.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ocr_app.cli.common import report_errors
from ocr_app.config import PROJECT_ROOT
from ocr_app.engine_factory import quiet_libraries
from ocr_app.errors import ConfigError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=__doc__.splitlines()[0])
DEFAULT_CONFIG = PROJECT_ROOT / "configs" / "train_ocr.toml"


@app.command()
def train(
    output: Annotated[Path, typer.Option(help="run folder: checkpoint.pt, metrics.jsonl, processor/")],
    config: Annotated[Optional[Path], typer.Option(help="recipe TOML (default: the checkpoint's, else configs/train_ocr.toml)")] = None,
    max_steps: Annotated[Optional[int], typer.Option(help="stop once the run has this many steps in all")] = None,
    max_minutes: Annotated[Optional[float], typer.Option(help="stop after this many minutes of this session")] = None,
    threads: Annotated[Optional[int], typer.Option(help="torch threads (default: the recipe's)")] = None,
    warm_start: Annotated[Optional[Path], typer.Option(help="exported model folder to continue from when --output has no checkpoint")] = None,
) -> None:
    """Train from scratch, or continue the run in --output (or an exported model with --warm-start)."""
    with report_errors():
        quiet_libraries()
        from ocr_app.train_ocr.config import load_train_config
        from ocr_app.train_ocr.trainer import CHECKPOINT_NAME, Budget, checkpoint_config, load_checkpoint, train as run

        if config is not None:
            recipe = load_train_config(config)
        elif (output / CHECKPOINT_NAME).exists():
            recipe = checkpoint_config(load_checkpoint(output / CHECKPOINT_NAME), str(output / CHECKPOINT_NAME))
        else:
            recipe = load_train_config(DEFAULT_CONFIG)
        if threads is not None:
            recipe = recipe.model_copy(update={"threads": threads})
        if max_steps is None and max_minutes is None:
            raise ConfigError("give a budget: --max-steps and/or --max-minutes")
        command = shlex.join(["ocr-train-ocr", *sys.argv[1:]])
        state = run(recipe, output, Budget(max_steps, max_minutes), command, warm_start)
        print(f"stopped at step {state.step} ({state.data_position} samples, {state.wall_s / 60:.1f} min in all)")


@app.command()
def export(
    output: Annotated[Path, typer.Option(help="run folder holding checkpoint.pt")],
    to: Annotated[Path, typer.Option(help="model folder to write (replaced)")],
    regions: Annotated[
        Optional[Path], typer.Option(help="recipe TOML whose regions table (\\[regions]) the folder reads pages with (default: the run's own)")
    ] = None,
) -> None:
    """Write the run's latest checkpoint as a Hugging Face model folder."""
    with report_errors():
        quiet_libraries()
        from ocr_app.train_ocr.export import export_checkpoint
        from ocr_app.train_ocr.trainer import CHECKPOINT_NAME

        checkpoint = output / CHECKPOINT_NAME
        if not checkpoint.exists():
            raise ConfigError(f"{checkpoint}: no checkpoint to export")
        print(export_checkpoint(checkpoint, to, regions))


def _resumed_trainer(output: Path, threads: int, command: str, samples_per_level: int | None = None):
    """A trainer holding the run's latest checkpoint with its own recipe, for measuring it."""
    from ocr_app.train_ocr.trainer import CHECKPOINT_NAME, Trainer, checkpoint_config, load_checkpoint

    checkpoint = output / CHECKPOINT_NAME
    if not checkpoint.exists():
        raise ConfigError(f"{checkpoint}: no such checkpoint; train first")
    saved = load_checkpoint(checkpoint)
    recipe = checkpoint_config(saved, str(checkpoint))
    evaluation = recipe.evaluation.model_copy(update={"samples_per_level": samples_per_level or recipe.evaluation.samples_per_level})
    trainer = Trainer(recipe.model_copy(update={"threads": threads, "evaluation": evaluation}), output, command=command)
    trainer.resume(saved)
    return trainer


@app.command()
def evaluate(
    output: Annotated[Path, typer.Option(help="run folder holding checkpoint.pt")],
    level: Annotated[Optional[list[str]], typer.Option(help="levels to read (default: the current stage's)")] = None,
    samples: Annotated[Optional[int], typer.Option(help="held-out samples per level (default: the recipe's)")] = None,
    threads: Annotated[int, typer.Option(help="torch threads")] = 2,
) -> None:
    """Greedy CER of the run's latest checkpoint on the held-out samples."""
    with report_errors():
        quiet_libraries()
        from ocr_app.train_ocr.config import TRAIN_LEVELS
        unknown = sorted(set(level or ()) - set(TRAIN_LEVELS))
        if unknown:
            raise ConfigError(f"--level: unknown level(s) {', '.join(unknown)} (levels: {', '.join(TRAIN_LEVELS)})")
        trainer = _resumed_trainer(output, threads, "evaluate", samples)
        results = trainer.evaluate(level)
        print(f"step {trainer.state.step}: " + " ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in results.items()))


@app.command()
def reliance(
    output: Annotated[Path, typer.Option(help="run folder holding checkpoint.pt")],
    level: Annotated[Optional[list[str]], typer.Option(help="levels to measure (default: line and block)")] = None,
    samples: Annotated[int, typer.Option(help="held-out samples per level")] = 16,
    threads: Annotated[int, typer.Option(help="torch threads")] = 2,
) -> None:
    """How much the answers depend on the image: held-out answer loss with the right image vs another's,
    on the documents' stock text and on words drawn independently."""
    with report_errors():
        quiet_libraries()
        from ocr_app.synth import LEVELS
        from ocr_app.train_ocr.data import held_out_examples
        if samples < 2:
            raise ConfigError("--samples: at least 2, so each answer has another sample's image to be read with")
        levels = level or ["line", "block"]
        unknown = sorted(set(levels) - set(LEVELS))
        if unknown:
            raise ConfigError(f"--level: unknown level(s) {', '.join(unknown)} (levels: {', '.join(LEVELS)})")
        trainer = _resumed_trainer(output, threads, "reliance")
        print(f"step {trainer.state.step}: answer loss, nats/token (own image / another's)")
        for name in levels:
            for random_text in (False, True):
                right, wrong = trainer.image_reliance(held_out_examples(name, samples, random_text, trainer.config.regions))
                text = "random words" if random_text else "stock text"
                print(f"{name:6} {text:12} {right:.3f} / {wrong:.3f}  gap {wrong - right:.3f}")
            if name != "word":
                first, later = trainer.word_start_losses(held_out_examples(name, samples, True, trainer.config.regions))
                print(f"{name:6} random words, loss at a word's first letter: first word {first:.3f}, later words {later:.3f}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
