"""Where the time goes when the hf engine reads: seconds per stage, for one page and for a folder in bulk.

    python benchmarks/profile_read.py                                  # samples/fatura.pdf page 1, then tob-mini
    python benchmarks/profile_read.py --page samples/fatura.pdf:1 --folder samples/tob-mini --limit 6 --drafts 3

Both readings go through the library as `ocr-read` does (`make_engine`, `read_documents`): the page in the
low-latency mode (one page, text streamed), the folder in the bulk mode.  Timers are put around the
library's own stages, none copied: functions and methods are wrapped, modules get forward hooks.  A stage's
time is its own, without the stages inside it (the MTP head's lm_head call counts as drafting); "other" is
the rest of the reading's wall time (transformers' generate loop, Python glue).  Rasterizing runs on the
pipeline's prefetch thread, alongside the reading, so shares can add up to more than 100%.

    rasterize        documents.pages.iter_pages: PDF page rendered / image decoded, fitted to the pixel budget
    deskew           regions.deskew.deskewed
    band cutting     regions.page_regions without deskewing: rules erased, bands, cells, chunks
    image processor  HFEngine.page_inputs: the processor's resize, patches, prompt tokens
    vision encoder   the model's visual tower
    prefill          the language model's first forward of a band (prompt and image tokens)
    decode forward   its one-token forwards (plain decoding, or a round with no drafts left)
    verify forward   its forwards over the last token and K drafts
    lm head          the main model's output projection
    drafting         MTPProposer.propose: the MTP head's K steps
    accept+rollback  verify_greedy and the cache rollback (RecordedStates.keep)
    detokenize       the tokenizer's decode (the streamer decodes the whole output after every token)
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from ocr_app import pipeline
from ocr_app.config import load_mode_preset, load_model_preset
from ocr_app.engine_factory import make_engine
from ocr_app.engines.hf import HFEngine
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.pipeline import Progress, ReadJob, read_documents
from ocr_app.regions import page as regions_page
from ocr_app.regions import reader as regions_reader
from ocr_app.speculative import decoder as speculative_decoder
from ocr_app.speculative.cache import RecordedStates
from ocr_app.speculative.proposer import MTPProposer
from ocr_app.tob import load_benchmark, select_pages

PROJECT_ROOT = Path(__file__).resolve().parent.parent
STAGES = ("rasterize", "deskew", "band cutting", "image processor", "vision encoder", "prefill", "decode forward",
          "verify forward", "lm head", "drafting", "accept+rollback", "detokenize")


class Profile:
    """Exclusive seconds and calls per stage; a thread-local stack takes nested stages' time out of their parent."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.local = threading.local()
        self.lock = threading.Lock()
        self.prefill_next = False  # the next language-model forward is a band's prefill

    def stack(self) -> list[list]:  # [[stage, started, time in nested stages]]
        if not hasattr(self.local, "stack"):
            self.local.stack = []
        return self.local.stack

    def inside(self, stage: str) -> bool:
        return any(entry[0] == stage for entry in self.stack())

    def push(self, stage: str) -> None:
        self.stack().append([stage, time.perf_counter(), 0.0])

    def pop(self) -> None:
        stage, started, nested = self.stack().pop()
        elapsed = time.perf_counter() - started
        if self.stack():
            self.stack()[-1][2] += elapsed
        with self.lock:
            self.seconds[stage] += elapsed - nested
            self.calls[stage] += 1

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.push(name)
        try:
            yield
        finally:
            self.pop()

    def wrap(self, owner, attribute: str, stage: str) -> None:
        original = getattr(owner, attribute)

        def timed(*args, **kwargs):
            with self.stage(stage):
                return original(*args, **kwargs)

        setattr(owner, attribute, timed)

    def wrap_generator(self, owner, attribute: str, stage: str) -> None:
        """Each step of the generator is timed (its work happens when the consumer asks for the next item)."""
        original = getattr(owner, attribute)

        def timed(*args, **kwargs):
            items = original(*args, **kwargs)
            while True:
                with self.stage(stage):
                    item = next(items, StopIteration)
                if item is StopIteration:
                    return
                yield item

        setattr(owner, attribute, timed)

    def hook(self, module: torch.nn.Module, classify: Callable[[tuple, dict], str | None]) -> None:
        """Forward hooks around `module`: `classify(args, kwargs)` names the stage (None: not timed)."""
        pushed = threading.local()

        def before(_, args, kwargs):
            stage = classify(args, kwargs)
            pushed.stage = stage
            if stage is not None:
                self.push(stage)

        def after(*_):
            if pushed.stage is not None:
                self.pop()

        module.register_forward_pre_hook(before, with_kwargs=True)
        module.register_forward_hook(after)


def instrument(profile: Profile, engine: HFEngine) -> None:
    profile.wrap_generator(pipeline, "iter_pages", "rasterize")
    profile.wrap(regions_page, "deskewed", "deskew")
    profile.wrap(regions_reader, "page_regions", "band cutting")
    original_inputs = HFEngine.page_inputs

    def page_inputs(self, image):
        with profile.stage("image processor"):
            inputs = original_inputs(self, image)
        profile.prefill_next = True
        return inputs

    HFEngine.page_inputs = page_inputs
    profile.wrap(MTPProposer, "propose", "drafting")
    profile.wrap(speculative_decoder, "verify_greedy", "accept+rollback")
    profile.wrap(RecordedStates, "keep", "accept+rollback")
    profile.wrap(engine.processor.tokenizer, "decode", "detokenize")
    model = engine.model
    profile.hook(model.model.visual, lambda args, kwargs: "vision encoder")

    def language_model_stage(args, kwargs) -> str:
        if profile.prefill_next:
            profile.prefill_next = False
            return "prefill"
        tokens = kwargs.get("inputs_embeds") if kwargs.get("inputs_embeds") is not None else kwargs.get("input_ids")
        return "decode forward" if tokens.shape[1] == 1 else "verify forward"

    profile.hook(model.model.language_model, language_model_stage)
    profile.hook(model.lm_head, lambda args, kwargs: None if profile.inside("drafting") else "lm head")


def profile_reading(engine, paths: list[Path], job: ReadJob) -> tuple[Profile, float, int, int]:
    """Read `paths` with `job` under fresh timers: (profile, wall seconds, pages, output tokens)."""
    profile = Profile()
    inner = engine
    while not isinstance(inner, HFEngine):  # the wrappers' wrapped engine
        inner = inner.engine
    instrument(profile, inner)
    started = time.perf_counter()
    results = list(read_documents(paths, engine, job, Progress(on_text=lambda *_: None)))
    wall = time.perf_counter() - started
    pages = [page for result in results for page in result.pages]
    return profile, wall, len(pages), sum(page.metrics.output_tokens for page in pages if page.metrics)


def table(title: str, profile: Profile, wall: float, pages: int, tokens: int) -> str:
    lines = [f"### {title}: {pages} page(s), {tokens} output tokens, {wall:.2f} s wall", "",
             "| Stage | Seconds | Share of wall | Calls |", "|---|---:|---:|---:|"]
    for stage in STAGES:
        if profile.calls[stage]:
            lines.append(f"| {stage} | {profile.seconds[stage]:.3f} | {100 * profile.seconds[stage] / wall:.1f}% | "
                         f"{profile.calls[stage]} |")
    own = sum(seconds for stage, seconds in profile.seconds.items() if stage != "rasterize")
    lines.append(f"| other (generate loop, glue) | {wall - own:.3f} | {100 * (wall - own) / wall:.1f}% | |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ocr-tiny-tr")
    parser.add_argument("--page", default="samples/fatura.pdf:1", help="DOCUMENT:PAGE read alone (low-latency)")
    parser.add_argument("--folder", default="samples/tob-mini", help="folder read in bulk")
    parser.add_argument("--limit", type=int, default=6, help="pages of the folder, round-robin over categories")
    parser.add_argument("--drafts", type=int, default=None, help="K; default: each mode's")
    parser.add_argument("--threads", type=int, default=None, help="torch threads; default: the preset's hf_threads")
    args = parser.parse_args()
    preset = load_model_preset(args.model)
    engine = make_engine("hf", preset)
    if args.threads:
        torch.set_num_threads(args.threads)
    document, number = args.page.rsplit(":", 1)
    print(f"command: python benchmarks/profile_read.py {' '.join(sys.argv[1:])}".rstrip())
    print(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, torch threads {torch.get_num_threads()}; load average before: "
          f"{' '.join(f'{load:.1f}' for load in os.getloadavg())}")
    for mode_name, paths, pages in (("low-latency", [PROJECT_ROOT / document], number),
                                    ("bulk", [Path(page.source) for page in select_pages(load_benchmark(PROJECT_ROOT / args.folder), limit=args.limit)], None)):
        mode = load_mode_preset(mode_name)
        drafts = mode.drafts if args.drafts is None else args.drafts
        job = ReadJob(model=preset, mode=mode, settings=GenerationSettings(max_tokens=preset.max_tokens, drafts=drafts),
                      pages=pages)
        profile, wall, count, tokens = profile_reading(engine, paths, job)
        print()
        print(table(f"{mode_name}, {drafts} drafts, {args.page if pages else args.folder}", profile, wall, count, tokens))
    print(f"load average after: {' '.join(f'{load:.1f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
