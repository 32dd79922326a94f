"""A batch run: many documents into one output folder, resumable after any crash.

Every page read is recorded in the state store (`ocr_app.batch.state`) the
moment it finishes, text included; a document's output file is written
atomically, from the store, once all its pages are there, and only then is the
document marked done.  So a run killed at any point loses at most the pages in
flight, and a rerun with the same output folder goes on from the store.

Resume rules, per document, on every run:

* The input's sha256 and the job key (model, prompt, pixel budget, engine,
  max tokens, sampling, pages, dpi -- what decides the page texts; not the
  mode, drafts or concurrency, which change only speed) are compared with the
  store.  If either changed, or `--force` is given, the document starts over.
* done, unchanged: skipped (if its output file is missing, it is written
  again from the pages in the store, without reading).
* pending (a run stopped part way): opened again and only the pages not
  already done are read; the finished ones come from the store.
* failed or partial, unchanged: left as they are and listed again as failures;
  `--retry-failed` reads them again, only their failed pages if they got as
  far as reading.
* A document with the same bytes as another (a duplicate) is not read: it is
  recorded as `duplicate` of the first one (the one already done, else the
  first in path order) and its output is written from that one's pages, so its
  output file holds the same text as the first's.  Empty files are never
  treated as duplicates of each other: they fail on their own.

A page that fails (cannot be rendered, or the engine failed on it) is read
again, in a later round, until it has been tried `max_attempts` times in this
run; then the document is failed with that page's error, or, with
`allow_partial`, written with a placeholder for the page and marked partial.
Setting `stop` hands the engine no new pages; the pages in flight finish and
are recorded, and everything else stays pending for the next run.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ocr_app.batch.state import DONE, DUPLICATE, FAILED, PARTIAL, PENDING, StateStore, content_hash
from ocr_app.documents import Document
from ocr_app.engines.protocol import Engine
from ocr_app.errors import InputError
from ocr_app.metrics import RunMetrics
from ocr_app.outputs import DEFAULT_PAGE_SEPARATOR, DocumentResult, PageResult, render_json, render_markdown, write_atomic
from ocr_app.pipeline import Progress, ReadJob, plan_document, read_pages

DEFAULT_MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class BatchOptions:
    output_dir: Path
    fmt: str = "md"
    page_separator: str = DEFAULT_PAGE_SEPARATOR
    force: bool = False
    retry_failed: bool = False
    allow_partial: bool = False
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    run_info: dict = field(default_factory=dict)  # recorded in JSON outputs: model, engine, mode, drafts


@dataclass
class BatchEvents:
    """Callbacks for a shell (progress bar, JSON log); all optional."""

    on_documents: Callable[[int], None] = lambda total: None
    on_planned: Callable[[int], None] = lambda pages: None
    on_page: Callable[[Path, PageResult, int], None] = lambda source, page, attempts: None
    on_document: Callable[[Path, str], None] = lambda source, status: None


@dataclass
class BatchSummary:
    written: list[Path] = field(default_factory=list)  # read (or assembled from the store) and written now
    skipped: list[Path] = field(default_factory=list)  # done in an earlier run, input unchanged
    duplicates: list[tuple[Path, Path]] = field(default_factory=list)  # (document, the one it copies)
    failed: list[tuple[Path, str]] = field(default_factory=list)  # failed or partial, with the reason
    pending: list[Path] = field(default_factory=list)  # left for the next run by a stop
    metrics: RunMetrics = field(default_factory=RunMetrics)
    pages_per_replica: Counter[str] = field(default_factory=Counter)  # on a Ray cluster: pages each replica read

    @property
    def ok(self) -> bool:
        return not self.failed and not self.pending


def job_key(job: ReadJob, engine_name: str) -> str:
    """A short hash of the settings that decide page texts (not speed-only ones such as drafts)."""
    settings = job.settings
    decisive = {
        "model": str(job.model.resolved_path()),
        "prompt": job.model.prompt,
        "chat_template": job.model.use_chat_template,
        "dtype": job.model.hf_dtype,
        "pixels": job.model.pixels.model_dump(),
        "engine": engine_name,
        "max_tokens": settings.max_tokens,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "seed": settings.seed,
        "pages": job.pages,
        "dpi": job.dpi,
    }
    return hashlib.sha256(json.dumps(decisive, sort_keys=True).encode()).hexdigest()[:16]


def placeholder(page: PageResult) -> str:
    return f"[page {page.number} could not be read: {page.error}]"


class BatchRun:
    """One run over an output folder: what is decided per document, whoever reads the pages
    (an engine in this process, `read_here`, or replicas on a Ray cluster, `ocr_app.batch.ray_run`)."""

    def __init__(self, engine_name: str, job: ReadJob, store: StateStore, options: BatchOptions, events: BatchEvents):
        self.job, self.store, self.options, self.events = job, store, options, events
        self.key = job_key(job, engine_name)
        self.summary = BatchSummary()
        self.tries: Counter[tuple[Path, int]] = Counter()  # reads of each page in this run

    def settle(
        self, targets: dict[Path, Path], stop: threading.Event, read: Callable[[list[Path]], None]
    ) -> BatchSummary:
        """Bring every document to done, failed or (after a stop) pending; `read` reads those that need it."""
        self.events.on_documents(len(targets))
        remove_cut_off_writes(self.options.output_dir)
        to_read, duplicates = self.triage(targets, stop)
        read(to_read)
        for source, original in duplicates.items():
            self.copy_duplicate(source, original)
        return self.summary

    def output_path(self, relative: Path) -> Path:
        return self.options.output_dir / relative

    def fail(self, source: Path, error: str, *, opened: bool = False, status: str = FAILED) -> None:
        self.store.set_document(source, status, error=error, opened=opened)
        if status == FAILED:
            row = self.store.document(source)
            if row is not None:  # an output from an earlier input would now be wrong
                self.output_path(row.output).unlink(missing_ok=True)
        self.summary.failed.append((source, error))
        self.events.on_document(source, status)

    def write(self, source: Path, pages: list[PageResult], output: Path) -> None:
        result = DocumentResult(source, tuple(pages))
        if self.options.fmt == "json":
            text = render_json(result, self.options.run_info)
        else:
            text = render_markdown(result, self.options.page_separator)
        write_atomic(self.output_path(output), text)

    def finish(self, source: Path, numbers: list[int]) -> None:
        """Write a document whose pages are all read (some perhaps failed) from the store."""
        row = self.store.document(source)
        stored = self.store.pages(source)
        missing = [n for n in numbers if n not in stored or stored[n].status != DONE]
        if not missing:
            self.write(source, [stored[n].result() for n in numbers], row.output)
            self.store.set_document(source, DONE)
            self.summary.written.append(source)
            self.events.on_document(source, DONE)
            return
        first = stored[missing[0]] if missing[0] in stored else None
        reason = first.error if first is not None else "not read"
        error = f"{source}: page {missing[0]}: {reason}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        if not self.options.allow_partial:
            self.fail(source, error)
            return
        pages = [stored[n].result() if n in stored else PageResult(n, "", error="not read") for n in numbers]
        shown = [page if page.ok else PageResult(page.number, placeholder(page), page.metrics, page.error) for page in pages]
        self.write(source, shown, row.output)
        self.fail(source, error, status=PARTIAL)

    def copy_duplicate(self, source: Path, original: Path) -> None:
        first = self.store.document(original)
        if first.status in (PENDING, DUPLICATE):  # a stop came before the original was done
            self.summary.pending.append(source)
            return
        if first.status in (FAILED, PARTIAL):
            self.fail(source, f"{source}: same content as {original}, which failed")
            return
        stored = self.store.pages(original)
        self.write(source, [stored[n].result() for n in sorted(stored)], self.store.document(source).output)
        self.store.set_document(source, DUPLICATE, duplicate_of=original)
        self.summary.duplicates.append((source, original))
        self.events.on_document(source, DUPLICATE)

    def triage(self, targets: dict[Path, Path], stop: threading.Event) -> tuple[list[Path], dict[Path, Path]]:
        """Sort documents into: to read, and duplicates (-> original); settle the rest (skipped, failed before)."""
        to_read: list[Path] = []
        duplicates: dict[Path, Path] = {}
        first_with_hash: dict[str, Path] = {}
        for source, target in targets.items():
            if stop.is_set():
                break
            output = target.relative_to(self.options.output_dir)
            try:
                digest = content_hash(source)
                empty = source.stat().st_size == 0
            except OSError as exc:
                self.store.start_document(source, output, None, self.key)
                self.fail(source, f"{source}: cannot read ({exc.strerror or exc})")
                continue
            row = self.store.document(source)
            if self.options.force or row is None or row.content_hash != digest or row.job_key != self.key:
                self.store.start_document(source, output, digest, self.key)
                row = self.store.document(source)
            elif row.output != output:  # e.g. another --format: same pages, another file
                self.store.set_document(source, row.status, output=output, error=row.error, duplicate_of=row.duplicate_of)
            if row.status == DONE and self.output_path(output).exists():
                self.skip(source)
                continue
            if row.status == DUPLICATE and self.output_path(output).exists():
                original = self.store.document(row.duplicate_of)
                if original is not None and original.status == DONE and original.content_hash == digest:
                    self.skip(source)
                    continue
            if row.status in (FAILED, PARTIAL) and not self.options.retry_failed:
                self.summary.failed.append((source, row.error or "failed"))
                self.events.on_document(source, row.status)
                continue
            if not empty:
                done_before = self.store.done_with_hash(digest, self.key)
                original = done_before.source if done_before is not None else first_with_hash.get(digest)
                if original is not None and original != source:
                    duplicates[source] = original
                    continue
                first_with_hash[digest] = source
            to_read.append(source)
        return to_read, duplicates

    def skip(self, source: Path) -> None:
        self.summary.skipped.append(source)
        self.events.on_document(source, "skipped")

    def open(self, to_read: list[Path], stop: threading.Event) -> dict[Path, tuple[Document, list[int]]]:
        planned: dict[Path, tuple[Document, list[int]]] = {}
        for source in to_read:
            if stop.is_set():
                self.summary.pending.append(source)
                continue
            try:
                document, numbers = plan_document(source, self.job)
            except InputError as exc:
                self.fail(source, str(exc), opened=True)
                continue
            self.store.set_document(source, PENDING, page_count=document.page_count, opened=True)
            planned[source] = (document, numbers)
        return planned

    def record_page(self, source: Path, page: PageResult) -> None:
        attempts = self.store.record_page(source, page)
        self.tries[(source, page.number)] += 1
        self.events.on_page(source, page, attempts)

    def unread(self, source: Path, numbers: list[int]) -> list[int]:
        """The pages not in the store yet; with none left (a crash came before the output was written),
        the document is finished now."""
        done = {n for n, page in self.store.pages(source).items() if page.status == DONE}
        remaining = [n for n in numbers if n not in done]
        if not remaining:
            self.finish(source, numbers)
        return remaining

    def after_reading(self, source: Path, numbers: list[int], failed: list[int]) -> list[int]:
        """The failed pages to read again, in the next round, under the attempt cap; with none, the
        document is finished (written, or failed with its first failed page's error)."""
        again = [n for n in failed if self.tries[(source, n)] < self.options.max_attempts]
        if not again:
            self.finish(source, numbers)
        return again

    def read_here(self, engine: Engine, planned: dict[Path, tuple[Document, list[int]]], stop: threading.Event) -> None:
        """Read what is not in the store yet, in rounds: failed pages go again, up to the cap."""
        progress = Progress(on_planned=self.events.on_planned, on_page=self.record_page)
        work: dict[Path, list[int]] = {}
        for source, (document, numbers) in planned.items():
            if remaining := self.unread(source, numbers):
                work[source] = remaining
        started = time.perf_counter()
        while work and not stop.is_set():
            batch = [(planned[source][0], numbers) for source, numbers in work.items()]
            work = {}
            for result in read_pages(batch, engine, self.job, progress, self.summary.metrics, stop):
                failed = [page.number for page in result.pages if not page.ok]
                if again := self.after_reading(result.source, planned[result.source][1], failed):
                    work[result.source] = again
        self.summary.metrics.wall_s = time.perf_counter() - started
        self.leave_pending(planned)

    def leave_pending(self, sources) -> None:
        """After the reading: the documents neither written nor failed are left for the next run."""
        finished = {source for source, _ in self.summary.failed} | set(self.summary.written)
        self.summary.pending.extend(source for source in sources if source not in finished)


def remove_cut_off_writes(output_dir: Path) -> None:
    """Temp files of `write_atomic` left by a crash in the middle of writing an output."""
    for leftover in output_dir.rglob(".*.part"):
        leftover.unlink(missing_ok=True)


def run_batch(
    targets: dict[Path, Path],
    engine: Engine,
    job: ReadJob,
    store: StateStore,
    options: BatchOptions,
    events: BatchEvents | None = None,
    stop: threading.Event | None = None,
) -> BatchSummary:
    """Bring every document in `targets` (input -> output file inside `options.output_dir`) to done,
    failed or (after a stop) pending, and say which is which."""
    run = BatchRun(engine.name, job, store, options, events or BatchEvents())
    stop = stop or threading.Event()
    return run.settle(targets, stop, lambda to_read: run.read_here(engine, run.open(to_read, stop), stop))
