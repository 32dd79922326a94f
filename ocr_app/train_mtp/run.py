"""A whole `ocr-train-mtp` run, as library calls: read (or reuse) the pages, evaluate the starting head,
train, export into the new model folder, check the main weights, evaluate the trained head."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ocr_app.config import ModelPreset
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.engine_factory import make_engine
from ocr_app.engines.hf import HFEngine
from ocr_app.errors import ConfigError, ModelError
from ocr_app.pages import DEFAULT_DPI
from ocr_app.provenance import code_version
from ocr_app.speculative.mtp_head import load_mtp_head
from ocr_app.train_mtp.config import TrainConfig
from ocr_app.train_mtp.data import (
    PageRead, PageRef, ReadCache, band_refs, document_pages, read_pages, split_pages, synth_pages,
)
from ocr_app.train_mtp.evaluate import HeadEvaluation, evaluate_head
from ocr_app.train_mtp.export import export_head, main_weight_hashes, prepare_output, record_head_training
from ocr_app.train_mtp.head_init import initial_head
from ocr_app.train_mtp.loop import CHECKPOINT_FILE, Example, StepReport, Trainer, pages_reached
from ocr_app.train_mtp.teacher import Teacher


@dataclass(frozen=True)
class TrainJob:
    model: ModelPreset
    output: Path
    config: TrainConfig
    data: Path | None = None
    synth_pages: int = 0
    init: str = "existing"  # existing | fresh | path to a head file
    resume: bool = False
    engine: str = "hf"  # which engine reads the pages
    concurrency: int = 1
    work_dir: Path | None = None  # default: OUTPUT.mtp-work next to the output folder
    device: str | None = None  # default: cuda when available
    dpi: int = DEFAULT_DPI
    in_place: bool = False
    command: str = "ocr-train-mtp"  # as typed, for the model card

    @property
    def resolved_work_dir(self) -> Path:
        return self.work_dir or self.output.parent / f"{self.output.name}.mtp-work"


@dataclass
class Callbacks:
    on_note: Callable[[str], None] = lambda line: None
    on_reading: Callable[[int], None] = lambda pages_to_read: None
    on_read: Callable[[PageRead], None] = lambda read: None
    on_training: Callable[[int, int], None] = lambda first_step, total_steps: None
    on_step: Callable[[StepReport], None] = lambda report: None
    on_evaluation: Callable[[HeadEvaluation], None] = lambda evaluation: None


@dataclass
class Prepared:
    teacher: Teacher
    train: list[Example]
    held_out: list[Example]
    weight_hashes: dict[str, str]  # of the main model the pages were read with
    problems: list[str] = field(default_factory=list)


def _page_refs(job: TrainJob) -> tuple[list[PageRef], list[str]]:
    """The pages to learn from; for a model that reads pages as bands, their bands: the head drafts on what
    the model reads."""
    refs, problems = document_pages(job.data) if job.data is not None else ([], [])
    refs += synth_pages(job.synth_pages)
    if not refs:
        raise ConfigError("no pages to learn from: give --data with documents (or --synth-pages)")
    if job.model.regions is not None:
        refs, unrendered = band_refs(refs, job.model.regions, job.model.pixels, job.dpi)
        problems += unrendered
    return refs, problems


def pages_to_train(refs: list[PageRef], config: TrainConfig) -> list[PageRef]:
    """The training pages the steps reach, a seeded share of them when `max_steps` ends the run within its
    epochs: only those are read (a release's head, 700 steps of 4 bands, reads ~2 800 of ~8 900 bands)."""
    reached = pages_reached(config, len(refs))
    if reached == len(refs):
        return refs
    return [refs[index] for index in sorted(random.Random(f"{config.seed}-pages").sample(range(len(refs)), reached))]


def prepare(job: TrainJob, callbacks: Callbacks, held_out_only: bool = False) -> Prepared:
    """Split the pages, have the main model read those not in the cache yet, load the teacher."""
    refs, problems = _page_refs(job)
    train_refs, held_out_refs = split_pages(refs, job.config.eval_fraction, job.config.seed)
    train_refs, held_out_refs = pages_to_train(train_refs, job.config), held_out_refs[: job.config.eval_pages]
    weight_hashes = main_weight_hashes(job.model.resolved_path())
    hf_engine = HFEngine(job.model)
    settings = GenerationSettings(max_tokens=job.model.max_tokens)
    meta = {
        "model": str(job.model.resolved_path().resolve()),
        "prompt": hf_engine.prompt,
        "pixels": job.model.pixels.model_dump(),
        "dpi": job.dpi,
        "max_tokens": job.model.max_tokens,
        "weights": weight_hashes,  # a model retrained in the same folder reads anew
    }
    if job.model.regions is not None:
        meta["regions"] = job.model.regions.model_dump()
    cache = ReadCache(job.resolved_work_dir / "reads", meta)
    wanted = held_out_refs if held_out_only else train_refs + held_out_refs
    missing = [ref for ref in wanted if ref.page_id not in cache.reads]
    if missing:
        callbacks.on_reading(len(missing))
        # The refs are bands already: the engine reads each as it is.
        engine = hf_engine if job.engine == "hf" else make_engine(job.engine, job.model.model_copy(update={"regions": None}))
        try:
            problems += read_pages(
                missing, engine, settings, cache, hf_engine.prompt, job.model.pixels, job.dpi, job.concurrency, callbacks.on_read
            )
        finally:
            if engine is not hf_engine:
                engine.close()
    device = torch.device(job.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    teacher = Teacher(hf_engine, device)

    def examples(page_refs: list[PageRef]) -> list[Example]:  # unread pages and pages with no output teach nothing
        reads = [(ref, cache.reads.get(ref.page_id)) for ref in page_refs]
        return [(ref, read) for ref, read in reads if read is not None and read.token_ids]

    return Prepared(teacher, [] if held_out_only else examples(train_refs), examples(held_out_refs), weight_hashes, problems)


def _evaluate(name, head, prepared: Prepared, job: TrainJob, callbacks: Callbacks) -> HeadEvaluation:
    evaluation = evaluate_head(
        name, head, prepared.teacher, prepared.held_out, job.model.pixels, job.dpi, job.config.eval_positions, job.model.max_tokens
    )
    callbacks.on_evaluation(evaluation)
    return evaluation


def evaluate_only(job: TrainJob, callbacks: Callbacks) -> list[HeadEvaluation]:
    """The input model's head, and the output folder's head when there is one."""
    prepared = prepare(job, callbacks, held_out_only=True)
    for problem in prepared.problems:
        callbacks.on_note(f"skipped: {problem}")
    model = prepared.teacher.model
    evaluations = [_evaluate("input head", load_mtp_head(job.model.resolved_path(), model), prepared, job, callbacks)]
    if (job.output / "config.json").exists():
        evaluations.append(_evaluate("output head", load_mtp_head(job.output, model), prepared, job, callbacks))
    return evaluations


def train(job: TrainJob, callbacks: Callbacks) -> list[HeadEvaluation]:
    started = time.monotonic()
    model_dir = job.model.resolved_path()
    work_dir = job.resolved_work_dir
    work_dir.mkdir(parents=True, exist_ok=True)
    if (work_dir / CHECKPOINT_FILE).exists() and not job.resume:
        raise ConfigError(f"{work_dir} holds a checkpoint of an earlier run; pass --resume or another --work-dir")
    if job.init not in ("existing", "fresh") and not Path(job.init).exists():
        raise ConfigError(f"--init {job.init}: expected existing, fresh, or a head file that exists")
    prepared = prepare(job, callbacks)
    hashes = prepared.weight_hashes
    for problem in prepared.problems:
        callbacks.on_note(f"skipped: {problem}")
    if not prepared.held_out:
        raise ConfigError("no held-out page with output to evaluate on")
    model = prepared.teacher.model
    before = _evaluate("before", initial_head(job.init, model_dir, model, job.config.seed), prepared, job, callbacks)
    head = initial_head(job.init, model_dir, model, job.config.seed)
    trainer = Trainer(job.config, prepared.teacher, head, prepared.train, job.model.pixels, job.dpi, work_dir)
    if job.resume and trainer.resume():
        callbacks.on_note(f"resumed at step {trainer.step} of {trainer.total_steps}")
    callbacks.on_training(trainer.step, trainer.total_steps)
    trainer.run(callbacks.on_step)
    prepare_output(model_dir, job.output, overwrite_input=job.in_place)
    export_head(head, job.output, model.dtype, model.config.text_config)
    if main_weight_hashes(model_dir) != hashes or main_weight_hashes(job.output) != hashes:
        raise ModelError("the main model's weights changed while training the head; this is a bug")
    callbacks.on_note(f"wrote {job.output}; main weights unchanged: " + ", ".join(f"{n} sha256 {h[:12]}" for n, h in hashes.items()))
    after = _evaluate("after", load_mtp_head(job.output, model), prepared, job, callbacks)
    record_head_training(job.output, head_record(job, prepared, trainer.step, before, after, time.monotonic() - started))
    return [before, after]


def head_record(job: TrainJob, prepared: Prepared, steps: int, before: HeadEvaluation, after: HeadEvaluation, wall_s: float) -> list[str]:
    """The model card's lines on how the head was made and how well it drafts on held-out pages."""

    def rates(evaluation: HeadEvaluation) -> str:
        return " ".join(f"{rate:.2f}" for rate in evaluation.decoding.acceptance_rate_per_position)

    # A model that reads pages as bands learns and is measured on the bands (and cells, chunks) of its pages.
    units = "pages" if job.model.regions is None else "bands"

    return [
        "Trained by `ocr-train-mtp` (self-distillation on the main model's own readings; main weights unchanged)",
        f"at commit `{code_version()}` in {wall_s / 60:.1f} min, reading included:",
        "",
        f"    {job.command}",
        "",
        f"- {len(prepared.train)} training {units}, {steps} optimizer steps, {job.config.draft_steps} chained draft steps",
        f"- On {after.pages} held-out {units}, decoding with {len(after.decoding.acceptance_rate_per_position)} drafts:",
        f"  acceptance per draft position {rates(after)} (before: {rates(before)}),",
        f"  mean acceptance length {after.decoding.mean_acceptance_length:.2f} (before: {before.decoding.mean_acceptance_length:.2f}),",
        f"  output identical to plain greedy decoding on {after.identical_pages}/{after.pages} {units}",
    ]
