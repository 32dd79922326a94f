"""What a batch run shows: a progress bar (documents, pages, pages/s, ETA) on a
terminal, a JSON line per finished page for monitoring, and a summary table."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from ocr_app.batch.runner import BatchEvents, BatchSummary
from ocr_app.outputs import PageResult
from ocr_app.speculative.auto import AutoDraftsReport


class _RateColumn(ProgressColumn):
    def render(self, task) -> Text:
        return Text(f"{task.speed:.2f} {task.fields.get('unit', '')}/s" if task.speed else "", style="cyan")


class BatchDisplay:
    """Two bars, documents and pages; silent when stderr is not a terminal."""

    def __init__(self, console: Console):
        self.progress = Progress(
            TextColumn("{task.description:>9}"),
            BarColumn(),
            MofNCompleteColumn(),
            _RateColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not console.is_terminal,
        )
        self.documents = self.progress.add_task("documents", total=None, unit="docs")
        self.pages = self.progress.add_task("pages", total=0, unit="pages")

    def __enter__(self) -> BatchDisplay:
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def on_documents(self, total: int) -> None:
        self.progress.update(self.documents, total=total)

    def on_planned(self, pages: int) -> None:
        task = self.progress.tasks[self.pages]
        self.progress.update(self.pages, total=(task.total or 0) + pages)

    def on_page(self, source: Path, page: PageResult, attempts: int) -> None:
        self.progress.advance(self.pages)

    def on_document(self, source: Path, status: str) -> None:
        self.progress.advance(self.documents)


class JsonLog:
    """One JSON object per line and per finished page (or failed read of one), flushed at once."""

    def __init__(self, handle: IO[str] | None):
        self.handle = handle

    def on_page(self, source: Path, page: PageResult, attempts: int) -> None:
        if self.handle is None:
            return
        event = {
            "event": "page",
            "time": round(time.time(), 3),
            "source": str(source),
            "page": page.number,
            "status": "done" if page.ok else "failed",
            "attempt": attempts,
            "error": page.error,
            "metrics": page.metrics.to_dict() if page.metrics is not None else None,
        }
        self.handle.write(json.dumps(event, ensure_ascii=False) + "\n")
        self.handle.flush()


@contextmanager
def batch_events(console: Console, log_path: Path | None) -> Iterator[BatchEvents]:
    """The progress display and the JSON log, wired to a run's callbacks."""
    with BatchDisplay(console) as display:
        handle = log_path.open("a", encoding="utf-8") if log_path is not None else None
        log = JsonLog(handle)
        try:
            yield BatchEvents(
                on_documents=display.on_documents,
                on_planned=display.on_planned,
                on_page=lambda *page_read: (display.on_page(*page_read), log.on_page(*page_read)),
                on_document=display.on_document,
            )
        finally:
            if handle is not None:
                handle.close()


def print_summary(console: Console, summary: BatchSummary, interrupted: bool = False,
                  auto: AutoDraftsReport | None = None) -> None:
    """`auto`: what drafts "auto" chose over the run, when it read with it."""
    metrics = summary.metrics
    table = Table(title="ocr-read batch" + (" (stopped early)" if interrupted else ""), show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("documents done", str(len(summary.written)))
    table.add_row("duplicates copied", str(len(summary.duplicates)))
    table.add_row("skipped (done before)", str(len(summary.skipped)))
    table.add_row("failed", str(len(summary.failed)))
    if summary.pending:
        table.add_row("left for the next run", str(len(summary.pending)))
    table.add_row("pages read", str(metrics.pages))
    table.add_row("pages/s", f"{metrics.pages_per_s:.2f}")
    table.add_row("tok/s", f"{metrics.tokens_per_s:.1f}")
    spec = metrics.spec
    table.add_row("mean acceptance length", f"{spec.mean_acceptance_length:.2f}" if spec else "- (no drafts)")
    if spec:
        table.add_row("acceptance per position", " ".join(f"{rate:.2f}" for rate in spec.acceptance_rate_per_position))
    if auto is not None:
        table.add_row("drafts auto", f"{auto.k_summary} (last: K={auto.last.k})")
    if summary.pages_per_replica:
        shares = ", ".join(f"{pages}" for _, pages in sorted(summary.pages_per_replica.items()))
        table.add_row("replicas (pages each)", f"{len(summary.pages_per_replica)} ({shares})")
    console.print(table)
    if summary.failed:
        failures = Table(title="failures", show_lines=False)
        failures.add_column("document", overflow="fold")
        failures.add_column("reason", overflow="fold")
        for source, reason in summary.failed:
            failures.add_row(str(source), reason.removeprefix(f"{source}: "))
        console.print(failures)
