"""The two stages of a folder run on Ray that run on the cluster's workers (`ocr_app.batch.ray_run` wires them).

* `document_pages`, a Ray task per document (`Dataset.flat_map`): open the document and render the pages
  not read yet, one row per page, lazily, so Ray Data streams them on as they come;
* `PageReader`, a Ray actor holding one engine (`Dataset.map_batches` over an actor pool): read a batch of
  pages with `ocr_app.pipeline.read_images`, as `ocr-read` does in bulk; the engine is the project's own
  (`make_engine`: MTP drafts, bands for a model with `[regions]`, repetition retries).

Every row between the stages, and out of them to the driver, has the same columns (`page_row`), so Ray
Data never has to reconcile schemas: a page carries its pixels until it is read, then its text; a row
with page number 0 says the document could not be opened, and a row with an error, that its page failed.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from PIL import Image

from ocr_app.errors import InputError
from ocr_app.outputs import PageResult
from ocr_app.pages import iter_pages
from ocr_app.pipeline import ReadJob, plan_document, read_images

DOCUMENT_ERROR = 0  # the page number of a row saying the document could not be opened


def page_row(
    source: str, page_count: int, number: int, *, image: Image.Image | None = None, error: str = ""
) -> dict:
    """A page on its way: the RGB pixels (raw, so the replica reads exactly what `ocr-read` would) or an error."""
    return {
        "source": source,
        "page_count": page_count,
        "number": number,
        "width": image.width if image is not None else 0,
        "height": image.height if image is not None else 0,
        "pixels": image.tobytes() if image is not None else b"",
        "text": "",
        "metrics": "",  # JSON of PageMetrics once read
        "error": error,
        "replica": "",  # which replica read it (host:pid), for the run summary
    }


def document_pages(item: dict, job: ReadJob) -> Iterator[dict]:
    """The pages of one document the job asks for, less those in `item["done"]`, rendered one by one."""
    source = item["source"]
    try:
        document, numbers = plan_document(Path(source), job)
    except InputError as exc:
        yield page_row(source, 0, DOCUMENT_ERROR, error=str(exc))
        return
    done = {int(number) for number in item["done"]}
    todo = [number for number in numbers if number not in done]
    rendered = 0
    try:
        for page in iter_pages(document, todo, job.model.page_pixels, job.dpi):
            rendered += 1
            yield page_row(source, document.page_count, page.number, image=page.image)
    # As in `read_pages`: PyMuPDF raises RuntimeErrors, Pillow OSErrors, when a file changed after it was opened.
    except (InputError, OSError, RuntimeError) as exc:
        for number in todo[rendered:]:
            yield page_row(source, document.page_count, number, error=str(exc))


class PageReader:
    """One replica: an engine started once per actor, reading the batches Ray Data hands it."""

    def __init__(self, engine_name: str, job: ReadJob):
        from ocr_app.engine_factory import make_engine, quiet_libraries

        quiet_libraries()
        self.job = job
        self.engine = make_engine(engine_name, job.model, job.settings.drafts)
        self.replica = f"{socket.gethostname()}:{os.getpid()}"

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        index = {(Path(row["source"]), row["number"]): row for row in rows}
        pages = [
            (key, Image.frombytes("RGB", (row["width"], row["height"]), row["pixels"]))
            for key, row in index.items()
            if not row["error"]
        ]
        for source, page in read_images(self.engine, pages, self.job):
            index[(source, page.number)].update(_read(page), replica=self.replica)
        for row in rows:
            row["pixels"] = b""  # the driver needs the text, not the page again
        return pa.Table.from_pylist(rows, schema=batch.schema)


def _read(page: PageResult) -> dict:
    metrics = json.dumps(page.metrics.to_dict()) if page.metrics is not None else ""
    return {"text": page.text, "metrics": metrics, "error": page.error or ""}
