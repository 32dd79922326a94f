"""Outputs: per-page results assembled into a document's Markdown or JSON, written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ocr_app.metrics import PageMetrics

DEFAULT_PAGE_SEPARATOR = "<!-- page {page} -->"


@dataclass(frozen=True)
class PageResult:
    number: int  # 1-based
    text: str
    metrics: PageMetrics | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class DocumentResult:
    source: Path
    pages: tuple[PageResult, ...] = ()
    error: str | None = None  # the document could not be opened at all

    @property
    def ok(self) -> bool:
        return self.error is None and all(page.ok for page in self.pages)

    @property
    def failure(self) -> str | None:
        if self.error is not None:
            return self.error
        failed = [page for page in self.pages if not page.ok]
        return f"{self.source}: page {failed[0].number}: {failed[0].error}" if failed else None


def render_markdown(result: DocumentResult, separator: str = DEFAULT_PAGE_SEPARATOR) -> str:
    """One section per page, each opened by the separator (`{page}` is the page number)."""
    sections = [f"{separator.format(page=page.number)}\n\n{page.text.strip()}\n" for page in result.pages]
    return "\n".join(sections)


def render_json(result: DocumentResult, run_info: dict | None = None) -> str:
    data = {
        "source": str(result.source),
        **(run_info or {}),
        "pages": [
            {
                "page": page.number,
                "text": page.text,
                "error": page.error,
                "metrics": page.metrics.to_dict() if page.metrics is not None else None,
            }
            for page in result.pages
        ],
    }
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once at import: os.umask can only be read by setting it, which is not thread-safe.
_UMASK = _read_umask()


def write_atomic(path: Path, text: str) -> None:
    """Write through a temp file in the same folder and rename it into place.

    A reader sees either the old file or the complete new one, never half of it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp's 0600 would make outputs private
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
