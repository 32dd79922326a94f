"""The batch state store: what a folder run has done, kept in SQLite next to its outputs.

The store is `OUTPUT_DIR/.ocr-read-state.sqlite` (standard-library `sqlite3`,
WAL journal, `synchronous=FULL`, one short transaction per change), so a run
killed at any moment -- SIGKILL, power loss -- leaves it consistent: a change
is either fully recorded or not at all.  A lock file next to it keeps a second
`ocr-read` off the same output folder.

Schema:

    meta(key PRIMARY KEY, value)            -- 'settings': JSON of the run's options,
                                            -- so `--retry-failed` can redo them
    documents(
        source PRIMARY KEY,                 -- absolute input path
        output,                             -- output path, relative to the output folder
        content_hash,                       -- sha256 of the input bytes; NULL if unreadable
        job_key,                            -- hash of the settings that decide page texts
        status,                             -- pending | done | partial | failed | duplicate
        page_count, attempts,               -- attempts: times the document was opened to read
        error,                              -- why it failed (one line)
        duplicate_of,                       -- source whose pages this one's output copies
        updated_at)
    pages(
        source, number,                     -- PRIMARY KEY; number is 1-based
        status,                             -- done | failed
        attempts,                           -- times the page was read, over all runs
        error, text,                        -- the page's text once done
        metrics,                            -- JSON of PageMetrics
        updated_at)

A page gets its row when it is first read; a document's pages are dropped when
its input bytes or the job change.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ocr_app.errors import OcrError
from ocr_app.metrics import PageMetrics
from ocr_app.outputs import PageResult

STATE_FILE = ".ocr-read-state.sqlite"
LOCK_FILE = ".ocr-read-state.lock"
PENDING, DONE, PARTIAL, FAILED, DUPLICATE = "pending", "done", "partial", "failed", "duplicate"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    source TEXT PRIMARY KEY,
    output TEXT NOT NULL,
    content_hash TEXT,
    job_key TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'done', 'partial', 'failed', 'duplicate')),
    page_count INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    duplicate_of TEXT,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_by_hash ON documents (content_hash);
CREATE TABLE IF NOT EXISTS pages (
    source TEXT NOT NULL REFERENCES documents (source) ON DELETE CASCADE,
    number INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
    attempts INTEGER NOT NULL,
    error TEXT,
    text TEXT,
    metrics TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (source, number)
);
"""


@dataclass(frozen=True)
class DocumentRow:
    source: Path
    output: Path  # relative to the output folder
    content_hash: str | None
    job_key: str
    status: str
    page_count: int | None
    attempts: int
    error: str | None
    duplicate_of: Path | None


@dataclass(frozen=True)
class PageRow:
    number: int
    status: str
    attempts: int
    error: str | None
    text: str
    metrics: PageMetrics | None

    def result(self) -> PageResult:
        return PageResult(number=self.number, text=self.text, metrics=self.metrics, error=self.error)


def content_hash(path: Path, chunk_size: int = 1 << 20) -> str:
    """sha256 of a file's bytes, read in chunks so a huge PDF never sits in memory."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def _metrics_to_json(metrics: PageMetrics | None) -> str | None:
    return json.dumps(metrics.to_dict()) if metrics is not None else None


def _metrics_from_json(text: str | None) -> PageMetrics | None:
    return PageMetrics.from_dict(json.loads(text)) if text is not None else None


class StateStore:
    """One output folder's record of documents and pages; every method is one transaction."""

    def __init__(self, connection: sqlite3.Connection):
        self.db = connection

    @classmethod
    @contextmanager
    def open(cls, folder: Path) -> Iterator[StateStore]:
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / LOCK_FILE).open("w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OcrError(f"{folder}: another ocr-read is working on this output folder") from None
            connection = sqlite3.connect(folder / STATE_FILE, isolation_level=None)
            try:
                try:
                    connection.execute("PRAGMA journal_mode=WAL")
                    connection.execute("PRAGMA synchronous=FULL")
                    connection.execute("PRAGMA foreign_keys=ON")
                    if connection.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                        raise sqlite3.DatabaseError("quick_check failed")
                    connection.executescript(_SCHEMA)
                except sqlite3.DatabaseError as exc:
                    raise OcrError(f"{folder / STATE_FILE}: damaged state store ({exc}); move it away to start over") from None
                yield cls(connection)
            finally:
                connection.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- run settings -------------------------------------------------------

    def save_settings(self, settings: dict) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES ('settings', ?)", (json.dumps(settings),))

    def load_settings(self) -> dict | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
        return json.loads(row[0]) if row else None

    # -- documents ----------------------------------------------------------

    def _document_row(self, row: tuple) -> DocumentRow:
        source, output, digest, job_key, status, page_count, attempts, error, duplicate_of = row
        return DocumentRow(
            Path(source), Path(output), digest, job_key, status, page_count, attempts, error,
            Path(duplicate_of) if duplicate_of else None,
        )

    _DOCUMENT_COLUMNS = "source, output, content_hash, job_key, status, page_count, attempts, error, duplicate_of"

    def document(self, source: Path) -> DocumentRow | None:
        row = self.db.execute(f"SELECT {self._DOCUMENT_COLUMNS} FROM documents WHERE source = ?", (str(source),)).fetchone()
        return self._document_row(row) if row else None

    def documents(self, *statuses: str) -> list[DocumentRow]:
        query = f"SELECT {self._DOCUMENT_COLUMNS} FROM documents"
        if statuses:
            query += f" WHERE status IN ({', '.join('?' * len(statuses))})"
        return [self._document_row(row) for row in self.db.execute(query + " ORDER BY source", statuses)]

    def done_with_hash(self, digest: str, job_key: str) -> DocumentRow | None:
        """A document read to the end from the same bytes under the same job, if any."""
        row = self.db.execute(
            f"SELECT {self._DOCUMENT_COLUMNS} FROM documents WHERE content_hash = ? AND job_key = ? "
            "AND status = 'done' ORDER BY source LIMIT 1",
            (digest, job_key),
        ).fetchone()
        return self._document_row(row) if row else None

    def start_document(self, source: Path, output: Path, digest: str | None, job_key: str) -> None:
        """A new document, or one whose bytes or job changed: forget its pages, mark it pending."""
        with self._transaction() as db:
            db.execute("DELETE FROM pages WHERE source = ?", (str(source),))
            db.execute(
                "INSERT OR REPLACE INTO documents (source, output, content_hash, job_key, status, updated_at) "
                "VALUES (?, ?, ?, ?, 'pending', ?)",
                (str(source), str(output), digest, job_key, time.time()),
            )

    def set_document(
        self,
        source: Path,
        status: str,
        *,
        output: Path | None = None,
        error: str | None = None,
        page_count: int | None = None,
        duplicate_of: Path | None = None,
        opened: bool = False,
    ) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE documents SET status = ?, error = ?, duplicate_of = ?, output = COALESCE(?, output), "
                "page_count = COALESCE(?, page_count), attempts = attempts + ?, updated_at = ? WHERE source = ?",
                (
                    status, error, str(duplicate_of) if duplicate_of else None, str(output) if output else None,
                    page_count, int(opened), time.time(), str(source),
                ),
            )

    # -- pages --------------------------------------------------------------

    def pages(self, source: Path) -> dict[int, PageRow]:
        rows = self.db.execute(
            "SELECT number, status, attempts, error, text, metrics FROM pages WHERE source = ? ORDER BY number",
            (str(source),),
        )
        return {
            number: PageRow(number, status, attempts, error, text or "", _metrics_from_json(metrics))
            for number, status, attempts, error, text, metrics in rows
        }

    def record_page(self, source: Path, page: PageResult) -> int:
        """Store one read of a page (its text, or its error); returns its attempts so far."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO pages (source, number, status, attempts, error, text, metrics, updated_at) "
                "VALUES (?, ?, ?, 1, ?, ?, ?, ?) ON CONFLICT (source, number) DO UPDATE SET "
                "status = excluded.status, attempts = attempts + 1, error = excluded.error, text = excluded.text, "
                "metrics = excluded.metrics, updated_at = excluded.updated_at",
                (
                    str(source), page.number, DONE if page.ok else FAILED, page.error,
                    page.text if page.ok else None, _metrics_to_json(page.metrics), time.time(),
                ),
            )
            return db.execute(
                "SELECT attempts FROM pages WHERE source = ? AND number = ?", (str(source), page.number)
            ).fetchone()[0]
