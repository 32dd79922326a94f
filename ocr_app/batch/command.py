"""The shell side of a folder run: what `ocr-read DIR -o OUT` and `ocr-read --retry-failed OUT` do
once the options are parsed -- settings recorded for a later `--retry-failed`, the engine started
(or, with `--ray`, replicas on a Ray cluster), signals caught, progress shown, the summary printed,
the exit code chosen."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from ocr_app.batch.report import batch_events, print_summary
from ocr_app.batch.ray_run import RayCluster, read_on_ray
from ocr_app.batch.runner import BatchOptions, BatchRun, run_batch
from ocr_app.batch.shutdown import stop_on_signals
from ocr_app.batch.state import FAILED, PARTIAL, STATE_FILE, StateStore
from ocr_app.config import load_ray_preset
from ocr_app.engine_factory import make_engine
from ocr_app.engines.protocol import ENGINE_NAMES, Drafts
from ocr_app.errors import ConfigError, OcrError
from ocr_app.pipeline import ReadJob


@dataclass(frozen=True)
class BatchSettings:
    """The options of a folder run, kept in its state store so `--retry-failed` reads the same way."""

    model: str
    engine: str
    mode: str
    drafts: Drafts | None
    pages: str | None
    dpi: int
    max_tokens: int | None
    temperature: float
    fmt: str
    page_separator: str
    allow_partial: bool
    servers: tuple[str, ...] = ()  # remote `vllm serve` URLs; empty = an engine in this process
    ray: str | None = None  # a Ray address: replicas on a Ray cluster read the pages (`ocr_app.batch.ray_run`)
    # Overrides of configs/modes.toml's [ray] table (None: the table's)
    replicas: int | None = None
    cpus_per_replica: float | None = None
    gpus_per_replica: float | None = None
    batch_size: int | None = None

    def ray_cluster(self) -> RayCluster | None:
        if self.ray is None:
            return None
        if self.servers:
            raise ConfigError("--ray starts its own engine replicas; it does not take --server")
        if self.engine not in ENGINE_NAMES:
            raise ConfigError(f"unknown engine '{self.engine}' (engines: {', '.join(ENGINE_NAMES)})")
        preset = load_ray_preset(
            replicas=self.replicas, cpus_per_replica=self.cpus_per_replica,
            gpus_per_replica=self.gpus_per_replica, batch_size=self.batch_size,
        )
        return RayCluster(self.ray, preset)


def recorded_settings(output_dir: Path) -> BatchSettings:
    if not (output_dir / STATE_FILE).exists():
        raise OcrError(f"{output_dir}: no batch run recorded here (no state store)")
    with StateStore.open(output_dir) as store:
        settings = store.load_settings()
    if settings is None:
        raise OcrError(f"{output_dir}: the state store records no run settings")
    return BatchSettings(**settings)


def read_folder(
    output_dir: Path,
    settings: BatchSettings,
    job: ReadJob,
    targets: dict[Path, Path] | None,
    *,
    force: bool = False,
    max_attempts: int = 3,
    log_json: Path | None = None,
) -> int:
    """Run a batch; `targets` None means: the documents that failed in this output folder.

    Returns the exit code: 0 all done, 1 something failed, 128+signal if stopped by one.
    """
    console = Console(stderr=True)
    retry_failed = targets is None
    with StateStore.open(output_dir) as store:
        if retry_failed:
            targets = {row.source: output_dir / row.output for row in store.documents(FAILED, PARTIAL)}
            if not targets:
                console.print("nothing failed: nothing to retry")
                return 0
        else:
            store.save_settings(asdict(settings))
        options = BatchOptions(
            output_dir=output_dir,
            fmt=settings.fmt,
            page_separator=settings.page_separator,
            force=force,
            retry_failed=retry_failed,
            allow_partial=settings.allow_partial,
            max_attempts=max_attempts,
            run_info={
                "model": job.model.name, "engine": settings.engine, "mode": job.mode.name, "drafts": job.settings.drafts
            },
        )
        cluster = settings.ray_cluster()
        engine = make_engine(settings.engine, job.model, job.settings.drafts, tuple(settings.servers)) if cluster is None else None
        try:
            with stop_on_signals(lambda line: console.print(line)) as stop, batch_events(console, log_json) as events:
                if cluster is None:
                    summary = run_batch(targets, engine, job, store, options, events, stop.event)
                else:
                    run = BatchRun(settings.engine, job, store, options, events)
                    summary = run.settle(
                        targets, stop.event, lambda to_read: read_on_ray(run, settings.engine, cluster, to_read, stop.event)
                    )
        finally:
            if engine is not None:
                engine.close()
    # the engine's account of drafts auto outlives its close; Ray replicas keep theirs
    auto = engine.auto_drafts_report() if engine is not None else None
    print_summary(console, summary, interrupted=stop.signum is not None, auto=auto)
    if stop.signum is not None:
        return stop.exit_code
    return 0 if summary.ok else 1
