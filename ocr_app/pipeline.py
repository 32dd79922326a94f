"""The pipeline wires the stages together: documents -> pages -> engine -> per-document results.

In streaming (low-latency) mode pages go to the engine one at a time and text
is handed to `on_text` as it is produced.  Otherwise pages of all documents are
rendered ahead on a thread and kept in flight together up to the mode's
concurrency; results are put back into page order per document, and a document
is yielded as soon as its last page is done.  A document that cannot be opened
or rendered is yielded with its error; the others go on.  If the engine fails,
the pages it was reading get that error and the rest go on in a fresh batch.

`read_pages` reads given pages of already opened documents (the batch runner
uses it to read only the pages a crashed run had not finished); setting its
`stop` event hands the engine no new pages, so the ones in flight finish.
`read_images` reads pages rendered elsewhere (a Ray replica's batch) the same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from PIL import Image

from ocr_app.config import ModelPreset, ModePreset
from ocr_app.documents import Document, open_document, parse_page_range
from ocr_app.engines.protocol import Engine, GenerationSettings, PageText
from ocr_app.errors import InputError, OcrError
from ocr_app.metrics import RunMetrics
from ocr_app.outputs import DocumentResult, PageResult
from ocr_app.pages import DEFAULT_DPI, iter_pages, prefetch
from ocr_app.repetition import as_retry, is_degenerate, retry_settings

PageKey = tuple[Path, int]
T = TypeVar("T")


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


def plan_document(path: Path, job: ReadJob) -> tuple[Document, list[int]]:
    """Open a document and pick the pages the job asks for; raises InputError."""
    document = open_document(path, job.password)
    return document, parse_page_range(job.pages, document.page_count)


def read_documents(
    paths: Iterable[Path],
    engine: Engine,
    job: ReadJob,
    progress: Progress | None = None,
    run_metrics: RunMetrics | None = None,
) -> Iterator[DocumentResult]:
    planned: list[tuple[Document, list[int]]] = []
    for path in paths:
        try:
            planned.append(plan_document(path, job))
        except InputError as exc:
            yield DocumentResult(path, error=str(exc))
    yield from read_pages(planned, engine, job, progress, run_metrics)


def read_pages(
    planned: Iterable[tuple[Document, list[int]]],
    engine: Engine,
    job: ReadJob,
    progress: Progress | None = None,
    run_metrics: RunMetrics | None = None,
    stop: threading.Event | None = None,
) -> Iterator[DocumentResult]:
    """Read the given pages of opened documents; each document is yielded once they are all done."""
    progress = progress or Progress()
    run_metrics = run_metrics if run_metrics is not None else RunMetrics()
    stop = stop or threading.Event()
    pending = {document.path: _Pending(document, numbers) for document, numbers in planned if numbers}
    progress.on_planned(sum(len(p.numbers) for p in pending.values()))

    started = time.perf_counter()
    page_failures: list[tuple[Path, int, str]] = []

    def page_images() -> Iterator[tuple[PageKey, Image.Image]]:
        for entry in list(pending.values()):  # a snapshot: `settle` removes finished documents meanwhile
            rendered = 0
            try:
                for page in iter_pages(entry.document, entry.numbers, job.model.page_pixels, job.dpi):
                    rendered += 1
                    yield (entry.document.path, page.number), page.image
            # PyMuPDF raises RuntimeErrors, Pillow OSErrors, when a file vanished or changed after it was opened.
            except (InputError, OSError, RuntimeError) as exc:
                for number in entry.numbers[rendered:]:
                    page_failures.append((entry.document.path, number, str(exc)))

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

    def drain_page_failures() -> Iterator[DocumentResult]:
        while page_failures:
            source, number, error = page_failures.pop(0)
            finished = settle(source, PageResult(number=number, text="", error=error))
            if finished is not None:
                yield finished

    if job.mode.stream:
        for (source, number), image in _until(stop, prefetch(page_images(), depth=2)):
            yield from drain_page_failures()
            page_text = engine.read(
                image, job.settings, on_text=lambda text, s=source, n=number: progress.on_text(s, n, text)
            )
            finished = settle(source, _page_result(number, page_text))
            if finished is not None:
                yield finished
    else:
        looping: dict[PageKey, PageText] = {}
        for (source, number), page_text in _read_in_bulk(
            engine, _until(stop, prefetch(page_images(), depth=8)), job.settings, job.mode.concurrency, page_failures
        ):
            yield from drain_page_failures()
            if is_degenerate(page_text):
                looping[(source, number)] = page_text
                continue
            finished = settle(source, _page_result(number, page_text))
            if finished is not None:
                yield finished
        # Pages stuck in a repetition loop are read once more (`retry_settings`), after
        # the first pass (an engine serves one read_many at a time); they are rendered again rather than
        # held in memory.  After a stop they stay unread, like pages never handed over.
        retry = retry_settings(job.settings, job.model.retry, engine)
        again = (
            ((page.document.path, page.number), page.image)
            for source, numbers in _by_document(looping)
            for page in iter_pages(pending[source].document, numbers, job.model.page_pixels, job.dpi)
        )
        for (source, number), page_text in _read_in_bulk(
            engine, _until(stop, again), retry, job.mode.concurrency, page_failures
        ):
            yield from drain_page_failures()
            finished = settle(source, _page_result(number, as_retry(looping.pop((source, number)), page_text)))
            if finished is not None:
                yield finished
    yield from drain_page_failures()


def read_images(
    engine: Engine, pages: list[tuple[PageKey, Image.Image]], job: ReadJob
) -> Iterator[tuple[Path, PageResult]]:
    """Read pages already rendered and held (a batch handed to a Ray replica) as `read_pages` reads in
    bulk: up to the mode's concurrency at once, a page stuck in a repetition loop once more with the
    retry settings, an engine failure failing the pages it was reading."""
    failures: list[tuple[Path, int, str]] = []
    looping: dict[PageKey, PageText] = {}
    for (source, number), page_text in _read_in_bulk(engine, iter(pages), job.settings, job.mode.concurrency, failures):
        if is_degenerate(page_text):
            looping[(source, number)] = page_text
        else:
            yield source, _page_result(number, page_text)
    images = dict(pages)
    again = ((key, images[key]) for key in list(looping))
    retry = retry_settings(job.settings, job.model.retry, engine)
    for (source, number), page_text in _read_in_bulk(engine, again, retry, job.mode.concurrency, failures):
        yield source, _page_result(number, as_retry(looping.pop((source, number)), page_text))
    for source, number, error in failures:
        yield source, PageResult(number=number, text="", error=error)


def _read_in_bulk(
    engine: Engine,
    pages: Iterator[tuple[PageKey, Image.Image]],
    settings: GenerationSettings,
    concurrency: int,
    page_failures: list[tuple[Path, int, str]],
) -> Iterator[tuple[PageKey, PageText]]:
    """`engine.read_many`, where an engine failure fails the pages it was reading and the rest go on."""
    in_flight: set[PageKey] = set()

    def hand_over() -> Iterator[tuple[PageKey, Image.Image]]:
        for key, image in pages:
            in_flight.add(key)
            yield key, image

    while True:
        try:
            for key, page_text in engine.read_many(hand_over(), settings, concurrency):
                in_flight.discard(key)
                yield key, page_text
            return
        except OcrError:
            raise
        except Exception as exc:  # noqa: BLE001 - an engine failure fails its pages, not the run
            if not in_flight:  # nothing was being read: the engine itself is broken
                raise
            error = f"engine error: {_first_line(exc)}"
            page_failures.extend((source, number, error) for source, number in sorted(in_flight))
            in_flight.clear()


def _by_document(keys: Iterable[PageKey]) -> list[tuple[Path, list[int]]]:
    numbers: dict[Path, list[int]] = {}
    for source, number in keys:
        numbers.setdefault(source, []).append(number)
    return list(numbers.items())


def _until(stop: threading.Event, items: Iterable[T]) -> Iterator[T]:
    for item in items:
        if stop.is_set():
            return
        yield item


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"
