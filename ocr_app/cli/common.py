"""What every command shares: library errors become one line on stderr and exit code 1."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from ocr_app.errors import OcrError


def quiet_libraries() -> None:
    """Keep stderr for our own progress and errors: no load bars or kernel-fallback notes."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


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
