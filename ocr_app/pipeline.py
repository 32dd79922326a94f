"""The pipeline wires the stages together: documents -> pages -> engine -> per-document results.

In streaming (low-latency) mode pages go to the engine one at a time and text
is handed to `on_text` as it is produced.  Otherwise pages of all documents are
rendered ahead on a thread and kept in flight together up to the mode's
concurrency; results are put back into page order per document, and a document
is yielded as soon as its last page is done.  A document that cannot be opened
or rendered is yielded with its error; the others go on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from ocr_app.config import ModelPreset, ModePreset
from ocr_app.documents import Document, open_document, parse_page_range
from ocr_app.engines import Engine, GenerationSettings
from ocr_app.errors import InputError
from ocr_app.metrics import RunMetrics
from ocr_app.outputs import DocumentResult, PageResult
from ocr_app.pages import DEFAULT_DPI, iter_pages, prefetch

PageKey = tuple[Path, int]


@dataclass(frozen=True)
class ReadJob:
    """Everything that says how to read, resolved from presets and options at the edge."""

    model: ModelPreset
    mode: ModePreset
    settings: GenerationSettings
    pages: str | None = None  # e.g. "1-3,7"; None = all
    dpi: int = DEFAULT_DPI
    password: str | None = None


@dataclass
class Progress:
    """Callbacks for a shell to show progress; all optional."""

    on_planned: Callable[[int], None] = lambda total_pages: None
    on_page: Callable[[Path, PageResult], None] = lambda source, page: None
    on_text: Callable[[Path, int, str], None] = lambda source, page_number, text: None


@dataclass
class _Pending:
    document: Document
    numbers: list[int]
    done: dict[int, PageResult] = field(default_factory=dict)

    def complete(self) -> bool:
        return len(self.done) == len(self.numbers)

    def result(self) -> DocumentResult:
        return DocumentResult(self.document.path, tuple(self.done[n] for n in self.numbers))


def _page_result(number: int, page_text) -> PageResult:
    return PageResult(number=number, text=page_text.text, metrics=page_text.metrics)


def read_documents(
    paths: Iterable[Path],
    engine: Engine,
    job: ReadJob,
    progress: Progress | None = None,
    run_metrics: RunMetrics | None = None,
) -> Iterator[DocumentResult]:
    progress = progress or Progress()
    run_metrics = run_metrics if run_metrics is not None else RunMetrics()
    pending: dict[Path, _Pending] = {}
    for path in paths:
        try:
            document = open_document(path, job.password)
            numbers = parse_page_range(job.pages, document.page_count)
        except InputError as exc:
            yield DocumentResult(path, error=str(exc))
            continue
        pending[path] = _Pending(document, numbers)
    progress.on_planned(sum(len(p.numbers) for p in pending.values()))

    started = time.perf_counter()
    render_failures: list[tuple[Path, int, str]] = []

    def page_images() -> Iterator[tuple[PageKey, Image.Image]]:
        for entry in pending.values():
            rendered = 0
            try:
                for page in iter_pages(entry.document, entry.numbers, job.model.pixels, job.dpi):
                    rendered += 1
                    yield (entry.document.path, page.number), page.image
            except InputError as exc:
                for number in entry.numbers[rendered:]:
                    render_failures.append((entry.document.path, number, str(exc)))

    def settle(source: Path, page: PageResult) -> DocumentResult | None:
        entry = pending[source]
        entry.done[page.number] = page
        if page.metrics is not None:
            run_metrics.observe_page(page.metrics)
        run_metrics.wall_s = time.perf_counter() - started
        progress.on_page(source, page)
        if entry.complete():
            del pending[source]
            return entry.result()
        return None

    def drain_render_failures() -> Iterator[DocumentResult]:
        while render_failures:
            source, number, error = render_failures.pop(0)
            finished = settle(source, PageResult(number=number, text="", error=error))
            if finished is not None:
                yield finished

    if job.mode.stream:
        for (source, number), image in prefetch(page_images(), depth=2):
            yield from drain_render_failures()
            page_text = engine.read(
                image, job.settings, on_text=lambda text, s=source, n=number: progress.on_text(s, n, text)
            )
            finished = settle(source, _page_result(number, page_text))
            if finished is not None:
                yield finished
    else:
        results = engine.read_many(prefetch(page_images(), depth=8), job.settings, job.mode.concurrency)
        for (source, number), page_text in results:
            yield from drain_render_failures()
            finished = settle(source, _page_result(number, page_text))
            if finished is not None:
                yield finished
    yield from drain_render_failures()
