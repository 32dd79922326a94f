"""A folder run on a Ray cluster: `ocr-read DIR -o OUT --ray [ADDRESS]` (docs/ray.md).

The driver, the process running `ocr-read`, decides per document exactly as a run on one machine does
(`BatchRun`: content hash and job key, skips, duplicates, the state store, atomic outputs); only the
reading moves to the cluster, as a Ray Data pipeline (`ocr_app.batch.ray_stages`):

    documents, one block each
      -> document_pages: Ray tasks on CPU workers open them and render their pages, streamed
      -> PageReader: an actor pool of engine replicas, `batch_size` pages per call
      -> the driver: each page recorded in the state store as its row arrives; a document
         written, its pages in order from the store, once they are all in

A worker or replica that dies costs only its pages in flight: Ray re-runs the tasks and restarts the
actors (Ray Data creates them with `max_restarts=-1`, their calls retried), and should the pipeline
fail all the same, the driver starts it again over the pages not in the store yet.  A row Ray delivers
twice is recorded once, so every document is written once.  Failed pages are read again in a later
round, up to the attempt cap, as on one machine.  A stop (Ctrl-C) abandons the pages in flight: they
are read again by the next run.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
import warnings
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ocr_app.batch.ray_stages import DOCUMENT_ERROR, PageReader, document_pages
from ocr_app.batch.runner import BatchRun
from ocr_app.batch.state import DONE, PENDING
from ocr_app.config import PROJECT_ROOT, RayPreset
from ocr_app.documents import parse_page_range
from ocr_app.errors import ConfigError, OcrError
from ocr_app.metrics import PageMetrics
from ocr_app.outputs import PageResult

LOCAL = "local"  # `--ray` without an address: a Ray instance started here, on this machine's CPUs and GPUs
_ADDRESS = re.compile(r"auto|ray://\S+|[\w.-]+:\d+")
# Rounds in a row in which the pipeline failed before a single page came back: the cluster cannot read
# (no node can start a replica, the model folder is missing on the workers); give up with its error.
MAX_FRUITLESS_ROUNDS = 3


def is_ray_address(value: str) -> bool:
    return value == LOCAL or _ADDRESS.fullmatch(value) is not None


@dataclass(frozen=True)
class RayCluster:
    address: str  # LOCAL, "auto" (the cluster this machine is a node of), "ray://host:port" or "host:port"
    preset: RayPreset

    def __post_init__(self) -> None:
        if not is_ray_address(self.address):
            raise ConfigError(
                f"--ray: '{self.address}' is not a Ray address (local, auto, ray://HOST:PORT or HOST:PORT)"
            )


def worker_environment() -> dict[str, str]:
    """What a worker needs of this process's environment: this checkout first on its import path (on a
    cluster whose nodes lack the path, an entry that is skipped) and the project's own `OCR_APP_*`."""
    path = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, **{key: value for key, value in os.environ.items() if key.startswith("OCR_APP_")}}


@contextmanager
def connected(address: str, preset: RayPreset) -> Iterator[None]:
    try:
        import ray
        from ray.data import DataContext
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install -e '.[cluster]'") from None

    # Ray Data's actors take their context from the object store, and Ray's core logs an error line on
    # stderr about it for every replica; its other logs stay in the session's log files.
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")
    options = {}
    if address == LOCAL:
        # Room for every replica and a render task whatever the core count: a replica asked to take all the
        # cores would otherwise leave none to render pages, and the run would wait for ever.
        needed = preset.replicas * preset.cpus_per_replica + preset.raster_cpus
        options = {"include_dashboard": False, "num_cpus": max(os.cpu_count() or 1, math.ceil(needed))}
    try:
        ray.init(
            address=None if address == LOCAL else address,
            runtime_env={"env_vars": worker_environment()},
            logging_level=logging.ERROR,
            log_to_driver=False,  # stderr is for our progress and summary; workers' logs stay on their nodes
            **options,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise OcrError(f"cannot reach the Ray cluster at {address}: {_first_line(exc)}") from None
    logging.getLogger("ray.data").setLevel(logging.CRITICAL)  # its errors reach us as exceptions
    context = DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    # Every replica is started before the first page is handed out (so no replica reads everything while the
    # others load the model), and a cluster that cannot hold them all says so rather than waiting for ever.
    context.wait_for_min_actors_s = preset.start_timeout_s
    try:
        yield
    finally:
        ray.shutdown()


class _RayReading:
    """The reading of one run on the cluster, in rounds; each round is one Ray Data pipeline."""

    def __init__(self, run: BatchRun, engine_name: str, preset: RayPreset, stop: threading.Event):
        self.run, self.engine_name, self.preset, self.stop = run, engine_name, preset, stop
        self.numbers: dict[Path, list[int]] = {}  # each document's pages the job asks for, once opened

    def start(self, to_read: list[Path]) -> dict[Path, list[int] | None]:
        """The pages each document needs read (None: all, not known before it is opened); a document
        opened by an earlier run, with all its pages in the store, is written without reading."""
        work: dict[Path, list[int] | None] = {}
        for source in to_read:
            row = self.run.store.document(source)
            if row.page_count is None:
                work[source] = None
                continue
            self.numbers[source] = parse_page_range(self.run.job.pages, row.page_count)
            if remaining := self.run.unread(source, self.numbers[source]):
                work[source] = remaining
        return work

    def read(self, to_read: list[Path]) -> None:
        work = self.start(to_read)
        metrics = self.run.summary.metrics
        started = time.perf_counter()
        fruitless = 0
        while work and not self.stop.is_set():
            work, pages, error = self.round(work)
            metrics.wall_s = time.perf_counter() - started
            fruitless = 0 if pages else fruitless + (error is not None)
            if fruitless >= MAX_FRUITLESS_ROUNDS:
                self.run.leave_pending(to_read)
                raise OcrError(f"the Ray cluster read nothing in {fruitless} tries: {error}")
        self.run.leave_pending(to_read)

    def pipeline(self, work: dict[Path, list[int] | None]):
        import ray.data
        from ray.util.annotations import RayDeprecationWarning

        items = [{"source": str(source), "done": self.done_before(source, numbers)} for source, numbers in work.items()]
        preset = self.preset
        pages = ray.data.from_items(items, override_num_blocks=len(items)).flat_map(
            document_pages,
            fn_kwargs={"job": self.run.job},
            num_cpus=preset.raster_cpus,
            compute=ray.data.TaskPoolStrategy(size=min(preset.raster_tasks, len(items))),
        )
        with warnings.catch_warnings():
            # Ray 2.60 deprecates remote arguments without a named parameter of their own, and SPREAD has none yet.
            warnings.simplefilter("ignore", RayDeprecationWarning)
            return pages.map_batches(
                PageReader,
                fn_constructor_kwargs={"engine_name": self.engine_name, "job": self.run.job},
                batch_size=preset.batch_size,
                batch_format="pyarrow",
                num_cpus=preset.cpus_per_replica,
                num_gpus=preset.gpus_per_replica,
                # One batch per replica at a time: a replica that dies takes no queue of pages with it, and a
                # replica that starts late still gets its share; the next batch is fetched in milliseconds.
                compute=ray.data.ActorPoolStrategy(size=preset.replicas, max_tasks_in_flight_per_actor=1),
                scheduling_strategy="SPREAD",  # a replica on each node before two on one, where Ray would pack them
            )

    def done_before(self, source: Path, to_read: list[int] | None) -> list[int]:
        """Pages the render task skips: those not asked for this round, or, unopened, those in the store."""
        if to_read is not None:
            return sorted(set(self.numbers[source]) - set(to_read))
        return sorted(n for n, page in self.run.store.pages(source).items() if page.status == DONE)

    def round(self, work: dict[Path, list[int] | None]) -> tuple[dict[Path, list[int] | None], int, str | None]:
        """One pipeline over `work`; returns the next round's work, the pages that came back, and the
        pipeline's error if it failed."""
        run = self.run
        waiting: dict[Path, set[int] | None] = {source: None if n is None else set(n) for source, n in work.items()}
        failed: dict[Path, list[int]] = defaultdict(list)
        following: dict[Path, list[int] | None] = {}
        pages, error = 0, None
        try:
            for row in self.pipeline(work).iter_rows():
                if self.stop.is_set():
                    break
                source = Path(row["source"])
                if source not in waiting:  # settled already: a row delivered again after a retry
                    continue
                if row["number"] == DOCUMENT_ERROR:
                    del waiting[source]
                    run.fail(source, row["error"], opened=True)
                    continue
                if waiting[source] is None:
                    waiting[source] = self.opened(source, row["page_count"])
                if row["number"] not in waiting[source]:
                    continue
                waiting[source].discard(row["number"])
                page = self.page(row)
                pages += 1
                if not page.ok:
                    failed[source].append(page.number)
                if not waiting[source]:
                    del waiting[source]
                    if again := run.after_reading(source, self.numbers[source], failed.pop(source, [])):
                        following[source] = again
        except OcrError:
            raise
        except Exception as exc:  # noqa: BLE001 - Ray's errors (a node lost past its retries): read the rest again
            if (hopeless := self.hopeless(exc)) is not None:
                raise hopeless from None
            error = _first_line(exc)
        for source, unread in waiting.items():  # cut off by a failure or a stop
            again = [n for n in failed.get(source, []) if run.tries[(source, n)] < run.options.max_attempts]
            following[source] = None if unread is None else sorted(unread | set(again))
        return following, pages, error

    def hopeless(self, exc: Exception) -> OcrError | None:
        """An error that reading again would only repeat: a replica whose engine cannot start (the model
        folder missing on a node), replicas the cluster cannot hold."""
        import ray

        if isinstance(exc, ray.exceptions.RayActorError) and exc.actor_init_failed:
            # The message ends with the traceback of the replica's constructor: its last line is the error.
            cause = str(exc).strip().splitlines()[-1].removeprefix("ocr_app.errors.")
            return OcrError(f"a Ray replica could not start its engine: {cause}")
        if isinstance(exc, ray.exceptions.GetTimeoutError):
            preset = self.preset
            return OcrError(
                f"the Ray cluster did not start {preset.replicas} replicas of {preset.cpus_per_replica:g} CPUs and "
                f"{preset.gpus_per_replica:g} GPUs in {preset.start_timeout_s} s: it has not the room for them"
            )
        return None

    def opened(self, source: Path, page_count: int) -> set[int]:
        """A document's first page is back: what it was opened to, and the pages of it this round reads."""
        self.numbers[source] = numbers = parse_page_range(self.run.job.pages, page_count)
        self.run.store.set_document(source, PENDING, page_count=page_count, opened=True)
        waiting = set(numbers) - set(self.done_before(source, None))
        self.run.events.on_planned(len(waiting))
        return waiting

    def page(self, row: dict) -> PageResult:
        """A page's row, recorded in the store and counted in the run's metrics."""
        metrics = PageMetrics.from_dict(json.loads(row["metrics"])) if row["metrics"] else None
        page = PageResult(number=row["number"], text=row["text"], metrics=metrics, error=row["error"] or None)
        self.run.record_page(Path(row["source"]), page)
        if metrics is not None:
            self.run.summary.metrics.observe_page(metrics)
        if row["replica"]:
            self.run.summary.pages_per_replica[row["replica"]] += 1
        return page


def read_on_ray(run: BatchRun, engine_name: str, cluster: RayCluster, to_read: list[Path], stop: threading.Event) -> None:
    """Read the documents `run.triage` left to read on the cluster; pages recorded, documents written."""
    if not to_read:
        return
    with connected(cluster.address, cluster.preset):
        _RayReading(run, engine_name, cluster.preset, stop).read(to_read)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"
