"""Tesseract (Debian `tesseract-ocr` + `tesseract-ocr-tur`) as a CPU baseline.

Each page goes to the `tesseract` command as PNG on stdin (Turkish model,
automatic page segmentation), one process per page with `OMP_THREAD_LIMIT=1`,
as many at once as there are CPU cores: Tesseract's own threading is slower
than running pages side by side.  It gets the page at its original resolution
(PDFs at the default DPI): it has no pixel budget, and downscaling would only
handicap it.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from PIL import Image

from ocr_app.errors import ModelError

LANGUAGE = "tur"
PAGE_TIMEOUT_S = 300


def unavailable_reason(language: str = LANGUAGE) -> str | None:
    """Why Tesseract cannot run here, or None when it can."""
    if shutil.which("tesseract") is None:
        return "tesseract is not installed (apt-get install -y tesseract-ocr tesseract-ocr-tur)"
    listed = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True, timeout=60)
    if language not in listed.stdout.split():
        return f"tesseract has no '{language}' language data (apt-get install -y tesseract-ocr-{language})"
    return None


def read_page(image: Image.Image, language: str = LANGUAGE) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    done = subprocess.run(
        ["tesseract", "stdin", "stdout", "-l", language, "--psm", "3"],
        input=buffer.getvalue(),
        capture_output=True,
        timeout=PAGE_TIMEOUT_S,
        env={**os.environ, "OMP_THREAD_LIMIT": "1"},
    )
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ModelError(f"tesseract failed: {message[-1] if message else done.returncode}")
    return done.stdout.decode("utf-8", "replace")


@dataclass(frozen=True)
class BaselineRun:
    texts: dict[str, str]  # by page id
    wall_s: float
    version: str


def version() -> str:
    done = subprocess.run(["tesseract", "--version"], capture_output=True, text=True, timeout=60)
    return (done.stdout or done.stderr).splitlines()[0].strip()


def read_pages(images: Iterable[tuple[str, Image.Image]], workers: int | None = None) -> BaselineRun:
    """Every page read by Tesseract, pages in parallel across the cores."""
    items = list(images)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        texts = list(pool.map(lambda item: read_page(item[1]), items))
    wall_s = time.perf_counter() - started
    return BaselineRun({page_id: text for (page_id, _), text in zip(items, texts)}, wall_s, version())
