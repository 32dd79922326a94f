"""`ocr-read`: documents in, Markdown (or JSON) out.

    ocr-read invoice.pdf -o out.md
    ocr-read a.pdf b.png scans/ -o out_dir/
    ocr-read --retry-failed out_dir/
    ocr-read scans/ -o out_dir/ --ray [ADDRESS]     # on a Ray cluster (docs/ray.md)

Bad input never ends in a traceback: each bad document gets one line on stderr
and is skipped, the others are written, and the exit code is 1 if anything failed.
A folder among the inputs makes it a batch run (`ocr_app.batch`): bulk mode by
default, resumable after a crash from the state store in the output folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from tqdm import tqdm

from ocr_app.batch.command import BatchSettings, read_folder, recorded_settings
from ocr_app.batch.ray_run import LOCAL, is_ray_address
from ocr_app.batch.runner import DEFAULT_MAX_ATTEMPTS
from ocr_app.cli.common import ENGINE_HELP, MAX_TOKENS_HELP, MODEL_HELP, report_errors
from ocr_app.config import default_model_name, drafts_for, load_mode_preset, load_model_preset
from ocr_app.documents import find_documents
from ocr_app.engines.protocol import Drafts, GenerationSettings, parse_drafts
from ocr_app.engine_factory import default_engine, make_engine, quiet_libraries
from ocr_app.errors import OcrError
from ocr_app.metrics import RunMetrics
from ocr_app.outputs import DEFAULT_PAGE_SEPARATOR, DocumentResult, render_json, render_markdown, write_atomic
from ocr_app.pages import DEFAULT_DPI
from ocr_app.pipeline import Progress, ReadJob, read_documents

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
FORMATS = ("md", "json")


STDOUT = Path("-")
EXAMPLES = """Examples:

  ocr-read invoice.pdf -o out.md                    # one document, one .md
  ocr-read invoice.pdf --pages 1-3 --format json -o out.json
  ocr-read scans/ -o out/ --glob '*.pdf'            # a folder; a rerun resumes
  ocr-read --retry-failed out/                      # its failed documents only
  ocr-read a.pdf --model qwen3.5-2b-ocr-tr --engine vllm -o a.md"""


def plan_outputs(inputs: list[Path], documents: list[Path], output: Path | None, fmt: str) -> dict[Path, Path | None]:
    """Where each document's result goes; None means standard output.

    A single document with `-o FILE.md|.json` goes to that file, `-o -` to
    standard output; otherwise `-o` is a folder and each document gets
    `<name>.<fmt>` in it, mirroring the layout below any input folder.
    """
    if output is None or output == STDOUT:
        if len(documents) > 1:
            raise OcrError("several documents need -o DIR")
        return {documents[0]: None}
    single_file = len(documents) == 1 and not inputs[0].is_dir() and output.suffix.lower() in (".md", ".json")
    if single_file:
        return {documents[0]: output}
    roots = [item for item in inputs if item.is_dir()]
    planned: dict[Path, Path | None] = {}
    taken: set[Path] = set()
    for document in documents:
        root = next((r for r in roots if document.is_relative_to(r)), None)
        relative = document.relative_to(root) if root is not None else Path(document.name)
        target = output / relative.with_suffix(f".{fmt}")
        if target in taken:  # a.pdf and a.png side by side
            target = output / relative.with_name(f"{relative.name}.{fmt}")
        taken.add(target)
        planned[document] = target
    return planned


@app.command(epilog=EXAMPLES)
def read(
    inputs: Annotated[Optional[list[Path]], typer.Argument(help="PDFs, images (PNG, JPEG, TIFF, WebP, BMP, GIF), or folders of them (a batch run).", show_default=False)] = None,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Output file (one document: .md or .json) or folder; default: standard output.")] = None,
    model: Annotated[Optional[str], typer.Option(help=MODEL_HELP)] = None,
    engine: Annotated[Optional[str], typer.Option(help=f"{ENGINE_HELP} Default: vllm for folders where installed, else hf.")] = None,
    mode: Annotated[Optional[str], typer.Option(help="Mode: low-latency (one page at a time, streamed) or bulk (many pages in flight); default: bulk for folders, else low-latency.")] = None,
    drafts: Annotated[Optional[str], typer.Option(help="MTP draft tokens per step, 0-7 (0 = plain decoding), or auto (chosen from measured acceptance and costs, docs/speculative-decoding.md); default: the model preset's or the mode's.")] = None,
    pages: Annotated[Optional[str], typer.Option(help="Pages to read, 1-based, e.g. 1-3,7 or 5-; default: all.")] = None,
    dpi: Annotated[int, typer.Option(help="PDF rendering resolution (dpi), before pages are fitted to the model's pixel budget.")] = DEFAULT_DPI,
    fmt: Annotated[str, typer.Option("--format", help="md (Markdown) or json (per-page text and metrics).")] = "md",
    page_separator: Annotated[str, typer.Option(help="Line opening each page in Markdown; {page} is its number.")] = DEFAULT_PAGE_SEPARATOR,
    password: Annotated[Optional[str], typer.Option(help="Password of encrypted PDFs; default: none.")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(help=MAX_TOKENS_HELP)] = None,
    temperature: Annotated[float, typer.Option(help="Sampling temperature; 0 = greedy.")] = 0.0,
    glob: Annotated[Optional[str], typer.Option(help="Within folders, read only files matching this pattern, e.g. '*.pdf'; default: every document.")] = None,
    retry_failed: Annotated[Optional[Path], typer.Option(help="Read again only the failed documents of this batch output folder, with its recorded settings.")] = None,
    force: Annotated[bool, typer.Option(help="Batch: redo every document, even those already done.")] = False,
    allow_partial: Annotated[bool, typer.Option(help="Batch: write a document whose pages partly failed, with a placeholder for each.")] = False,
    max_attempts: Annotated[int, typer.Option(help="Batch: reads of a failing page before giving up on it.")] = DEFAULT_MAX_ATTEMPTS,
    log_json: Annotated[Optional[Path], typer.Option(help="Batch: append one JSON line per finished or failed page to this file; default: none.")] = None,
    server: Annotated[
        Optional[list[str]],
        typer.Option(help="URL of a running `vllm serve` to send pages to (repeatable; with --engine vllm); default: start vLLM here."),
    ] = None,
    ray: Annotated[
        Optional[str],
        typer.Option(
            "--ray", metavar="[ADDRESS]",
            help="Batch: read on a Ray cluster (docs/ray.md): alone, a Ray instance started here; auto, ray://HOST:PORT or HOST:PORT, a running one.",
        ),
    ] = None,
    replicas: Annotated[Optional[int], typer.Option(help="Ray: engine replicas; default from configs/modes.toml \\[ray].")] = None,
    cpus_per_replica: Annotated[Optional[float], typer.Option(help="Ray: CPUs each replica takes.")] = None,
    gpus_per_replica: Annotated[Optional[float], typer.Option(help="Ray: GPUs each replica takes.")] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Ray: pages handed to a replica at a time.")] = None,
) -> None:
    """Read documents into Markdown."""
    quiet_libraries()
    inputs = inputs or []
    with report_errors():
        if fmt not in FORMATS:
            raise OcrError(f"unknown format '{fmt}' (formats: {', '.join(FORMATS)})")
        if dpi < 36 or dpi > 1200:
            raise OcrError(f"--dpi must be between 36 and 1200, got {dpi}")
        drafts = parse_drafts(drafts) if drafts is not None else None
        servers = tuple(server or ())
        folder_run = retry_failed is not None or any(item.is_dir() for item in inputs)
        engine = engine or default_engine(folder_run, servers)
        if folder_run:
            requested = BatchSettings(
                model=_absolute_if_folder(model or default_model_name()), engine=engine, mode=mode or "bulk",
                drafts=drafts, pages=pages, dpi=dpi, max_tokens=max_tokens, temperature=temperature, fmt=fmt,
                page_separator=page_separator, allow_partial=allow_partial, servers=servers,
                ray=ray, replicas=replicas, cpus_per_replica=cpus_per_replica, gpus_per_replica=gpus_per_replica,
                batch_size=batch_size,
            )
            exit_code = _read_batch(inputs, output, retry_failed, glob, password, requested, force, max_attempts, log_json)
            raise typer.Exit(exit_code)
        if not inputs:
            raise OcrError("give documents or folders to read (or --retry-failed OUTPUT_DIR)")
        if ray is not None:
            raise OcrError("--ray reads folders: give a folder and -o OUTPUT_DIR")
        job = build_job(model or default_model_name(), mode or "low-latency", drafts, max_tokens, temperature, pages, dpi, password)
        documents = find_documents(inputs, glob)
        targets = plan_outputs(inputs, documents, output, fmt)
        _check_writable(targets)
        reader = make_engine(engine, job.model, job.settings.drafts, servers)
        failures = _run(documents, reader, job, targets, fmt, page_separator, engine)
        reader.close()
    if failures:
        raise typer.Exit(1)


def _read_batch(
    inputs: list[Path], output: Path | None, retry_failed: Path | None, glob: str | None, password: str | None,
    requested: BatchSettings, force: bool, max_attempts: int, log_json: Path | None,
) -> int:
    """A folder run; `--retry-failed DIR` takes the settings recorded in DIR instead of `requested`."""
    settings = recorded_settings(retry_failed) if retry_failed is not None else requested
    job = build_job(settings.model, settings.mode, settings.drafts, settings.max_tokens, settings.temperature,
                    settings.pages, settings.dpi, password)
    if retry_failed is not None:
        return read_folder(retry_failed.absolute(), settings, job, None, force=force, max_attempts=max_attempts, log_json=log_json)
    if output is None or output == STDOUT or output.is_file():
        raise OcrError("a folder run needs -o OUTPUT_DIR (a folder)")
    # Absolute paths key the state store, so a rerun from another folder still finds its documents.
    inputs, output = [item.absolute() for item in inputs], output.absolute()
    targets = plan_outputs(inputs, find_documents(inputs, glob), output, fmt=settings.fmt)
    _check_writable(targets)
    return read_folder(output, settings, job, targets, force=force, max_attempts=max_attempts, log_json=log_json)


def build_job(
    model: str, mode: str, drafts: Drafts | None, max_tokens: int | None, temperature: float,
    pages: str | None, dpi: int, password: str | None,
) -> ReadJob:
    model_preset = load_model_preset(model)
    mode_preset = load_mode_preset(mode)
    settings = GenerationSettings(
        max_tokens=max_tokens or model_preset.max_tokens,
        drafts=drafts if drafts is not None else drafts_for(model_preset, mode_preset),
        temperature=temperature,
    )
    return ReadJob(model=model_preset, mode=mode_preset, settings=settings, pages=pages, dpi=dpi, password=password)


def _absolute_if_folder(model: str) -> str:
    """A model folder is recorded absolute, so `--retry-failed` finds it from anywhere."""
    return str(Path(model).resolve()) if Path(model).is_dir() else model


def _check_writable(targets: dict[Path, Path | None]) -> None:
    for target in {t for t in targets.values() if t is not None}:
        folder = next((p for p in [target.parent, *target.parent.parents] if p.exists()), None)
        if folder is None or not folder.is_dir() or not _can_write(folder):
            raise OcrError(f"cannot write {target}: {folder or target.parent} is not a writable folder")
        if target.is_dir():
            raise OcrError(f"cannot write {target}: it is a folder")


def _can_write(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _run(documents, engine, job: ReadJob, targets, fmt: str, separator: str, engine_name: str) -> int:
    run_metrics = RunMetrics()
    bar = tqdm(total=0, unit="page", desc="reading", file=sys.stderr, disable=None, leave=False)
    progress = Progress(on_planned=lambda total: bar.reset(total=total), on_page=lambda source, page: bar.update())
    failures = 0
    run_info = {"model": job.model.name, "engine": engine_name, "mode": job.mode.name, "drafts": job.settings.drafts}
    for result in read_documents(documents, engine, job, progress, run_metrics):
        if not result.ok:
            failures += 1
            tqdm.write(f"error: {result.failure}", file=sys.stderr)
            continue
        _write(result, targets[result.source], fmt, separator, run_info)
    bar.close()
    summary = run_metrics.to_dict()
    print(
        f"{len(documents) - failures}/{len(documents)} documents, {summary['pages']} pages, "
        f"{summary['pages_per_s']:.2f} pages/s, {summary['tokens_per_s']:.1f} tok/s",
        file=sys.stderr,
    )
    if run_metrics.spec is not None:
        spec = run_metrics.spec
        rates = " ".join(f"{rate:.2f}" for rate in spec.acceptance_rate_per_position)
        print(
            f"MTP: mean acceptance length {spec.mean_acceptance_length:.2f}, "
            f"{spec.num_accepted_tokens}/{spec.num_draft_tokens} draft tokens accepted, per position {rates}",
            file=sys.stderr,
        )
    auto = engine.auto_drafts_report()
    if auto is not None:
        print(f"drafts auto: {auto.k_summary} ({auto.last.why()})", file=sys.stderr)
    return failures


def _write(result: DocumentResult, target: Path | None, fmt: str, separator: str, run_info: dict) -> None:
    text = render_json(result, run_info) if fmt == "json" else render_markdown(result, separator)
    if target is None:
        sys.stdout.write(text)
    else:
        write_atomic(target, text)


def with_ray_address(argv: list[str]) -> list[str]:
    """`--ray` may come without its address (a Ray instance started here); click options cannot, so the
    address `local` is filled in where what follows `--ray` is not an address (a folder, another option)."""
    if "--ray" not in argv:
        return argv
    at = argv.index("--ray") + 1
    if at < len(argv) and is_ray_address(argv[at]):
        return argv
    return [*argv[:at], LOCAL, *argv[at:]]


def main() -> None:
    app(args=with_ray_address(sys.argv[1:]), prog_name="ocr-read")


if __name__ == "__main__":
    main()
