"""One read request from the UI: uploads checked, the pipeline run on a worker thread, its events gathered.

The pipeline (`ocr_app.pipeline.read_documents`) does the reading; this module
only runs it off the web server's thread and turns its callbacks into a
`Reading`, the state the page shows: per-page text and metrics, per-document
metrics, errors, and the `.md`/`.json` files to download.  One document at a
time goes through the pipeline so that each has its own wall time (pages/s).

The pipeline reports a page when it is done; a page of a model that reads by
regions takes dozens of engine readings (one per band, cell or chunk), so the
live figures (tokens, tok/s, acceptance) count each reading's own metrics as it
comes back from the engine, in both modes: in bulk nothing else moves until a
page is done.
"""

from __future__ import annotations

import dataclasses
import html
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from ocr_app.config import PixelBudget
from ocr_app.documents import Document, open_document, parse_page_range
from ocr_app.engines.protocol import Engine, GenerationSettings, Key, PageText, TextCallback, WrappedEngine
from ocr_app.errors import InputError, OcrError
from ocr_app.metrics import PageMetrics, RunMetrics, SpecDecodingStats
from ocr_app.outputs import DocumentResult, PageResult, render_json, render_markdown
from ocr_app.pages import iter_pages
from ocr_app.pipeline import Progress, ReadJob, read_documents
from ocr_app.regions import ReadByRegions

log = logging.getLogger(__name__)

# Page images as shown next to their text, and upload thumbnails: small, fast to render.  A thumbnail has
# twice the pixels it is shown at, so that it stays sharp on a high-density screen.
VIEW_BUDGET = PixelBudget(min_pixels=32 * 32, max_pixels=1024 * 1280)
VIEW_DPI = 100
THUMB_BUDGET = PixelBudget(min_pixels=32 * 32, max_pixels=300 * 420)
THUMB_DPI = 50
MAX_THUMBS_PER_DOCUMENT = 12
# The page is refreshed at most this often while tokens stream in, and at least this often
# (elapsed time, live figures) while nothing does.
REFRESH_S = 0.1
IDLE_REFRESH_S = 1.0


@dataclass(frozen=True)
class Upload:
    """A file the browser uploaded; Gradio keeps the browser's file name as the last part of its path."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    def message(self, error: Exception | str) -> str:
        """The library's one-line message, naming the file as the user knows it, not its server path."""
        return str(error).replace(str(self.path), self.name)


def accept_uploads(paths: list[str], upload_root: Path) -> list[Upload]:
    """Only files under the server's upload folder are ever opened, whatever the request names."""
    root = upload_root.resolve()
    uploads = []
    for raw in paths:
        path = Path(raw).resolve()
        if not path.is_relative_to(root):
            raise InputError(f"{Path(raw).name}: not an uploaded file")
        uploads.append(Upload(path))
    return uploads


@dataclass(frozen=True)
class PlannedDocument:
    upload: Upload
    document: Document
    numbers: list[int]
    job: ReadJob


def plan_documents(uploads: list[Upload], job: ReadJob, max_pages: int) -> tuple[list[PlannedDocument], list[str]]:
    """Open every upload; bad ones become messages, the others are planned.

    The page range applies to PDFs; an image's pages are all read.
    Raises InputError when the pages to read are more than `max_pages`.
    """
    planned: list[PlannedDocument] = []
    errors: list[str] = []
    for upload in uploads:
        try:
            document = open_document(upload.path)
            pages = job.pages if document.kind == "pdf" else None
            numbers = parse_page_range(pages, document.page_count)
        except InputError as exc:
            errors.append(upload.message(exc))
            continue
        planned.append(PlannedDocument(upload, document, numbers, dataclasses.replace(job, pages=pages)))
    total = sum(len(item.numbers) for item in planned)
    if total > max_pages:
        raise InputError(
            f"{total} pages to read, over this server's limit of {max_pages} per request; choose fewer pages"
        )
    return planned, errors


def describe_uploads(uploads: list[Upload]) -> tuple[list[tuple[Image.Image, str]], list[str], list[str]]:
    """Thumbnails (image, caption) of the first pages of each upload, one line per good upload, and
    the message of each bad one."""
    thumbs: list[tuple[Image.Image, str]] = []
    lines: list[str] = []
    errors: list[str] = []
    for upload in uploads:
        try:
            document = open_document(upload.path)
            numbers = list(range(1, min(document.page_count, MAX_THUMBS_PER_DOCUMENT) + 1))
            for page in iter_pages(document, numbers, THUMB_BUDGET, THUMB_DPI):
                thumbs.append((page.image, f"{upload.name} · {page.number}"))
        except InputError as exc:
            errors.append(upload.message(exc))
            continue
        kind = "PDF" if document.kind == "pdf" else (document.image_format or "image")
        lines.append(f"{upload.name}: {kind}, {_count(document.page_count, 'page')}")
    return thumbs, lines, errors


def page_image(upload: Upload, number: int) -> Image.Image | None:
    """The page as shown beside its text; None if it cannot be rendered (its error is shown instead)."""
    try:
        document = open_document(upload.path)
        return next(iter_pages(document, [number], VIEW_BUDGET, VIEW_DPI)).image
    except InputError:
        return None


def page_label(title: str, number: int) -> str:
    return f"{title} · page {number}"


@dataclass
class PageEntry:
    upload: Upload
    label: str
    number: int
    text: str = ""
    metrics: PageMetrics | None = None
    error: str | None = None
    started: float | None = None

    @property
    def done(self) -> bool:
        return self.metrics is not None or self.error is not None


@dataclass
class DocumentEntry:
    upload: Upload
    title: str  # the upload's name, numbered when two uploads share it
    pages: int
    metrics: RunMetrics = field(default_factory=RunMetrics)
    done: bool = False


@dataclass
class Reading:
    """Everything the page shows about one read request."""

    model: str
    engine: str
    mode: str
    drafts: int
    stream: bool = True  # pages read one at a time, text streamed (else in bulk: several pages in flight)
    # What the engine has produced so far, over its readings (bands or pages, so `live.pages` counts readings).
    live: RunMetrics = field(default_factory=RunMetrics)
    pages: dict[str, PageEntry] = field(default_factory=dict)
    documents: list[DocumentEntry] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    downloads: list[str] = field(default_factory=list)
    current: str | None = None
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None

    @property
    def run_info(self) -> dict:
        """The same run description `ocr-read --format json` writes."""
        return {"model": self.model, "engine": self.engine, "mode": self.mode, "drafts": self.drafts}


class _Cancelled(Exception):
    """The request went away (browser closed, job cancelled): stop reading at the next token."""


class _CountedReadings(WrappedEngine):
    """Hands the metrics of every reading the engine returns to `observe`, as it comes back."""

    def __init__(self, engine: Engine, observe: Callable[[PageMetrics], None]):
        super().__init__(engine)
        self.observe = observe

    def read(self, image: Image.Image, settings: GenerationSettings, on_text: TextCallback | None = None) -> PageText:
        page = self.engine.read(image, settings, on_text)
        self.observe(page.metrics)
        return page

    def read_many(
        self, pages: Iterable[tuple[Key, Image.Image]], settings: GenerationSettings, concurrency: int
    ) -> Iterator[tuple[Key, PageText]]:
        for key, page in self.engine.read_many(pages, settings, concurrency):
            self.observe(page.metrics)
            yield key, page


def count_readings(engine: Engine, observe: Callable[[PageMetrics], None]) -> Engine:
    """`engine` for one request, with `observe` called on each reading's metrics: each band's, cell's or
    chunk's for an engine that reads pages by regions (beneath the split, so that the figures move while
    a page is read), each page's otherwise.  The shared engine itself is left as it is."""
    if isinstance(engine, ReadByRegions):
        return ReadByRegions(_CountedReadings(engine.engine, observe), engine.split, engine.budget)
    return _CountedReadings(engine, observe)


def _read_on_thread(
    planned: list[PlannedDocument],
    engine: Engine,
    engine_lock: threading.Lock,
    events: queue.Queue,
    cancelled: threading.Event,
) -> None:
    def send(*event) -> None:
        if cancelled.is_set():
            raise _Cancelled
        events.put(event)

    counted = count_readings(engine, lambda metrics: send("counts", metrics))
    try:
        # Gradio's queue already runs one read at a time; the lock also covers a
        # cancelled request whose last page is still being generated.
        with engine_lock:
            for index, item in enumerate(planned):
                metrics = RunMetrics()
                progress = Progress(
                    on_text=lambda source, number, piece, i=index: send("text", i, number, piece),
                    on_page=lambda source, page, i=index: send("page", i, page),
                )
                for result in read_documents([item.upload.path], counted, item.job, progress, metrics):
                    send("document", index, result, metrics)
    except _Cancelled:
        pass
    except OcrError as exc:
        message = str(exc)
        for item in planned:
            message = item.upload.message(message)
        events.put(("error", message))
    except Exception as exc:  # the worker must always report back, or the page would wait forever
        log.exception("reading failed")
        events.put(("error", f"internal error while reading ({type(exc).__name__}); see the server log"))
    finally:
        events.put(("end",))


def _unique_name(name: str, taken: set[str]) -> str:
    stem, suffix = Path(name).stem, Path(name).suffix
    candidate, count = name, 1
    while candidate in taken:
        count += 1
        candidate = f"{stem}-{count}{suffix}"
    taken.add(candidate)
    return candidate


def _write_downloads(reading: Reading, upload: Upload, result: DocumentResult, out_dir: Path, taken: set[str]) -> None:
    """The files `ocr-read` writes for this document, named after the upload."""
    named = dataclasses.replace(result, source=Path(upload.name))
    stem = _unique_name(Path(upload.name).stem, taken)  # fatura.pdf and fatura.png both read: fatura, fatura-2
    for suffix, text in ((".md", render_markdown(named)), (".json", render_json(named, reading.run_info))):
        path = out_dir / f"{stem}{suffix}"
        path.write_text(text, encoding="utf-8")
        reading.downloads.append(str(path))


def run_reading(
    planned: list[PlannedDocument],
    engine: Engine,
    engine_lock: threading.Lock,
    reading: Reading,
    out_dir: Path,
) -> Iterator[Reading]:
    """Read the planned documents, yielding `reading` each time there is something new to show."""
    titles: set[str] = set()
    for item in planned:
        title = _unique_name(item.upload.name, titles)
        reading.documents.append(DocumentEntry(item.upload, title, len(item.numbers)))
        for number in item.numbers:
            reading.pages[page_label(title, number)] = PageEntry(item.upload, page_label(title, number), number)
    # The first page is shown at once, before any of it is read (in bulk, nothing else shows for a while).
    reading.current = next(iter(reading.pages), None)
    yield reading
    events: queue.Queue = queue.Queue()
    cancelled = threading.Event()
    worker = threading.Thread(
        target=_read_on_thread, args=(planned, engine, engine_lock, events, cancelled), name="ocr-ui-read", daemon=True
    )
    worker.start()
    taken: set[str] = set()
    try:
        ended = False
        while not ended:
            try:
                batch = [events.get(timeout=IDLE_REFRESH_S)]
            except queue.Empty:
                yield reading  # the elapsed time moves on
                continue
            deadline = time.perf_counter() + REFRESH_S
            while batch[-1][0] in ("text", "counts") and (left := deadline - time.perf_counter()) > 0:
                try:
                    batch.append(events.get(timeout=left))
                except queue.Empty:
                    break
            for event in batch:
                ended = _apply(event, reading, out_dir, taken) or ended
            yield reading
    finally:
        cancelled.set()


def _apply(event: tuple, reading: Reading, out_dir: Path, taken: set[str]) -> bool:
    """Fold one worker event into `reading`; True at the end of the request."""
    kind = event[0]
    if kind == "text":
        _, index, number, piece = event
        _page(reading, index, number).text += piece
    elif kind == "counts":
        reading.live.observe_page(event[1])
    elif kind == "page":
        _, index, page = event
        _settle_page(_page(reading, index, page.number), page)
    elif kind == "document":
        _, index, result, metrics = event
        document = reading.documents[index]
        document.metrics, document.done = metrics, True
        if result.ok:
            _write_downloads(reading, document.upload, result, out_dir, taken)
        else:
            reading.errors.append(document.upload.message(result.failure))
    elif kind == "error":
        reading.errors.append(event[1])
    elif kind == "end":
        reading.finished = time.perf_counter()
        return True
    return False


def _page(reading: Reading, index: int, number: int) -> PageEntry:
    entry = reading.pages[page_label(reading.documents[index].title, number)]
    if entry.started is None:
        entry.started = time.perf_counter()
    reading.current = entry.label
    return entry


def _settle_page(entry: PageEntry, page: PageResult) -> None:
    entry.text, entry.metrics = page.text, page.metrics
    if page.error is not None:
        entry.error = entry.upload.message(page.error)


# --- what the page shows -------------------------------------------------------------------------


def errors_html(messages: list[str]) -> str:
    """Messages as one alert box; nothing at all when there are none."""
    if not messages:
        return ""
    title = "Error" if len(messages) == 1 else f"{len(messages)} errors"
    items = "".join(f"<li>{html.escape(message, quote=False)}</li>" for message in messages)
    return f'<div class="ocr-errors" role="alert"><strong>{title}</strong><ul>{items}</ul></div>'


def progress_markdown(reading: Reading) -> str:
    """Where the request stands: pages done of all, time so far, and the live figures."""
    done_pages = sum(entry.done for entry in reading.pages.values())
    total = len(reading.pages)
    seconds = (reading.finished or time.perf_counter()) - reading.started
    if reading.finished is None:
        current = reading.pages.get(reading.current) if reading.current else None
        if not reading.stream:
            where = " in bulk"
        elif current is not None and not current.done:
            where = f" {current.label}"
        else:
            where = ""
        head = f"Reading{where}: {done_pages} of {_count(total, 'page')} done, {seconds:.0f} s"
    elif done_pages:
        documents = sum(document.done for document in reading.documents)
        head = f"Done: {_count(done_pages, 'page')} from {_count(documents, 'document')} in {seconds:.1f} s"
    else:
        return "Nothing was read."
    bar = f'<progress value="{done_pages}" max="{total}"></progress>' if total else ""
    return "\n\n".join(part for part in (head, bar, _live_line(reading, seconds)) if part)


def _live_line(reading: Reading, seconds: float) -> str:
    live = reading.live
    if not live.output_tokens:
        return ""
    parts = [f"{live.output_tokens} tokens", f"{live.output_tokens / seconds:.1f} tok/s"]
    if reading.drafts and live.spec is not None and live.spec.num_drafts:
        rates = " / ".join(f"{rate:.0%}" for rate in live.spec.acceptance_rate_per_position)
        parts.append(
            f"{reading.drafts} drafts: mean acceptance length {live.spec.mean_acceptance_length:.2f}, "
            f"accepted per position {rates}"
        )
    return " · ".join(parts)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _spec_cells(drafts: int, spec: SpecDecodingStats | None) -> str:
    if not drafts or spec is None or not spec.num_drafts:
        return "– | –"
    accepted = " / ".join(str(count) for count in spec.accepted_per_position)
    return f"{spec.mean_acceptance_length:.2f} | {accepted} of {spec.num_drafts}"


def figures_markdown(reading: Reading) -> str:
    """Per-page and per-document figures, live while the request runs."""
    now = time.perf_counter()
    page_rows = []
    for entry in reading.pages.values():
        if entry.metrics is not None:
            m = entry.metrics
            page_rows.append(
                f"| {entry.label} | {m.output_tokens} | {m.wall_s:.2f} | {m.tokens_per_s:.1f} | {m.finish_reason} "
                f"| {m.drafts} | {_spec_cells(m.drafts, m.spec)} |"
            )
        elif entry.error is not None:
            page_rows.append(f"| {entry.label} | error | | | | | | |")
        elif entry.started is not None:
            page_rows.append(f"| {entry.label} | reading… | {now - entry.started:.1f} | | | | | |")
    document_rows = []
    for document in reading.documents:
        m = document.metrics
        if not m.pages:
            continue
        document_rows.append(
            f"| {document.title} | {m.pages}/{document.pages} | {m.wall_s:.2f} | {m.pages_per_s:.2f} "
            f"| {m.tokens_per_s:.1f} | {reading.engine} | {reading.drafts} | {_spec_cells(reading.drafts, m.spec)} |"
        )
    parts = []
    if page_rows:
        parts.append(
            "| page | tokens | s | tok/s | end | drafts | mean acceptance length | accepted per position |\n"
            "|---|---:|---:|---:|---|---:|---:|---|\n" + "\n".join(page_rows)
        )
    if document_rows:
        parts.append(
            "| document | pages | s | pages/s | tok/s | engine | drafts | mean acceptance length | accepted per position |\n"
            "|---|---:|---:|---:|---:|---|---:|---:|---|\n" + "\n".join(document_rows)
        )
    return "\n\n".join(parts)
