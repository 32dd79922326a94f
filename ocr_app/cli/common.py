"""What every command shares: library errors become one line on stderr and exit code 1."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from ocr_app.engines.protocol import ENGINE_NAMES
from ocr_app.errors import OcrError

# Help of the options that ocr-read, ocr-eval and ocr-ui share.
MODEL_HELP = "Model: a preset name (configs/models/), a preset .toml, or a model folder; default: ocr-tiny-tr (configs/defaults.toml)."
ENGINE_HELP = f"Engine: {' or '.join(ENGINE_NAMES)} (hf: transformers)."
MAX_TOKENS_HELP = "Most tokens written per page; default: the model preset's max_tokens."


@contextmanager
def report_errors() -> Iterator[None]:
    try:
        yield
    except OcrError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise typer.Exit(130) from None
