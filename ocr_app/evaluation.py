"""Benchmark runs: the same pages at each number of drafts, scored, checked for unchanged output, and timed.

One evaluation renders every selected page once (fitted to the model's pixel
budget, as `ocr-read` would) and keeps the images in memory, so rendering is
not timed.  Then, for each K in `drafts` (0 first, the reference), it reads
the first min(8, highest concurrency) pages at that concurrency as an untimed
warm-up (an engine that fixes K at start restarts here, and batched shapes get
warm), then all pages, timed, at each concurrency.

* The *unchanged check* compares each K > 0 run with the K = 0 run at the same
  concurrency: the score of each, the share of pages whose text is identical,
  and where differing pages first differ (character and token index), with the
  main model's top-2 logit gap there in each run (`PageText.top2_gaps`; a gap
  under `NEAR_TIE_GAP` is a near-tie, where rounding, e.g. vLLM's bf16 with
  other batch shapes, may pick either token).  Pages re-read after a
  repetition loop are marked: on an engine whose re-reads are sampled
  (`repetition.lossless_retries`) their text depends on the drafts by design,
  and the check says so.  It fails when the score moves by more than the
  tolerance.
* The *speed table* gives, per run, output tokens/s and pages/s over the run's
  wall time, the speedup over K = 0 at the same concurrency (ratio of tok/s),
  and the per-position acceptance and mean acceptance length summed over the
  run's pages (`SpecDecodingStats`).
* With drafts "auto" among the settings, the engine's account of the K it chose and why
  (`Evaluation.auto`, an `AutoDraftsReport`) is taken after every run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from PIL import Image

from ocr_app.config import RetryPreset
from ocr_app.engines.protocol import AUTO_DRAFTS, Drafts, Engine, GenerationSettings, PageText
from ocr_app.metrics import RunMetrics
from ocr_app.repetition import as_retry, is_degenerate, lossless_retries, retry_settings
from ocr_app.scoring import PageScore, Scorer, ScoreSummary, summarize
from ocr_app.speculative.auto import AutoDraftsReport
from ocr_app.tob import BenchmarkPage

DIFF_CONTEXT = 40  # characters shown on each side of a first difference
MAX_WARMUP_PAGES = 8
# A top-2 logit gap below this is a near-tie: bf16 keeps 8 bits of a logit (a logit of 16-32 is rounded to
# 1/16-1/8), and two runs that batch differently add up different roundings on the way there.
NEAR_TIE_GAP = 0.5


@dataclass
class Run:
    """All pages read once at one number of drafts and one concurrency."""

    drafts: Drafts
    concurrency: int
    outputs: dict[str, PageText]  # by page id
    scores: dict[str, PageScore]  # by page id
    summary: ScoreSummary
    metrics: RunMetrics

    @property
    def label(self) -> str:
        return f"K={self.drafts}, concurrency {self.concurrency}"


@dataclass(frozen=True)
class Difference:
    page_id: str
    char_index: int  # first differing character of the text
    token_index: int  # first differing output token
    reference_excerpt: str  # the K = 0 text around that point
    drafted_excerpt: str
    reference_gap: float | None = None  # main model's top-2 logit gap at that token in the K = 0 run
    drafted_gap: float | None = None  # and in the drafted run; None where the engine gave none
    retried: bool = False  # either run re-read the page after a repetition loop

    @property
    def near_tie(self) -> bool:
        gaps = [gap for gap in (self.reference_gap, self.drafted_gap) if gap is not None]
        return bool(gaps) and min(gaps) < NEAR_TIE_GAP


@dataclass(frozen=True)
class UnchangedCheck:
    drafts: Drafts
    concurrency: int
    reference_score: float
    score: float
    identical_pages: int
    pages: int
    differences: tuple[Difference, ...]
    tolerance: float
    retried_pages: int = 0  # pages re-read after a repetition loop in either run
    lossless_retries: bool = True  # the engine re-reads them with the same text whatever the drafts

    @property
    def score_delta(self) -> float:
        return self.score - self.reference_score

    @property
    def identical_share(self) -> float:
        return self.identical_pages / self.pages if self.pages else 1.0

    @property
    def passed(self) -> bool:
        return abs(self.score_delta) <= self.tolerance


@dataclass(frozen=True)
class SpeedRow:
    drafts: Drafts
    concurrency: int
    pages: int
    output_tokens: int
    wall_s: float
    tokens_per_s: float
    pages_per_s: float
    speedup: float  # tok/s over tok/s at K = 0, same concurrency
    mean_acceptance_length: float | None
    acceptance_per_position: tuple[float, ...]


@dataclass
class Evaluation:
    runs: list[Run]
    checks: list[UnchangedCheck]
    speed: list[SpeedRow]
    pages: list[BenchmarkPage] = field(repr=False)
    warmup_s: dict[Drafts, float] = field(default_factory=dict)  # per K: warm-up page, plus any engine restart
    auto: AutoDraftsReport | None = None  # with drafts "auto": what it chose and why


def draft_order(drafts: Iterable[Drafts]) -> list[Drafts]:
    """0 (the reference) and the given K, ascending, then auto."""
    return sorted(set(drafts) | {0}, key=lambda k: (k == AUTO_DRAFTS, 0 if k == AUTO_DRAFTS else k))


ProgressCallback = Callable[[str, int], None]  # (run label, pages done)


def prepare_images(pages: Iterable[BenchmarkPage], budget) -> list[tuple[str, Image.Image]]:
    return [(page.id, page.image(budget)) for page in pages]


def read_run(
    engine: Engine,
    images: list[tuple[str, Image.Image]],
    categories: dict[str, str],
    references: dict[str, str],
    settings: GenerationSettings,
    concurrency: int,
    scorer: Scorer,
    on_page: ProgressCallback | None = None,
    retry: RetryPreset | None = None,
) -> Run:
    """Read every image once (timed as a whole) and score each page.  With `retry`, pages that end in a
    repetition loop are read again after the pass, as `ocr-read` does (`ocr_app.pipeline`), and timed with it."""
    outputs: dict[str, PageText] = {}
    started = time.perf_counter()
    for page_id, page_text in engine.read_many(iter(images), settings, concurrency):
        outputs[page_id] = page_text
        if on_page:
            on_page(f"K={settings.drafts} c={concurrency}", len(outputs))
    looping = [(page_id, image) for page_id, image in images if retry is not None and is_degenerate(outputs[page_id])]
    if looping:
        again = retry_settings(settings, retry, engine)
        for page_id, page_text in engine.read_many(iter(looping), again, concurrency):
            outputs[page_id] = as_retry(outputs[page_id], page_text)
    metrics = RunMetrics(wall_s=time.perf_counter() - started)
    for page_id, _ in images:
        metrics.observe_page(outputs[page_id].metrics)
    scores = {page_id: scorer(outputs[page_id].text, references[page_id]) for page_id, _ in images}
    summary = summarize((categories[page_id], score) for page_id, score in scores.items())
    return Run(settings.drafts, concurrency, outputs, scores, summary, metrics)


def first_difference(a: str, b: str) -> int:
    """Index of the first character where `a` and `b` differ (the shorter length if one is a prefix)."""
    return len(os.path.commonprefix([a, b]))


def gap_at(page: PageText, token_index: int) -> float | None:
    gaps = page.top2_gaps
    return gaps[token_index] if gaps is not None and token_index < len(gaps) else None


def compare_runs(reference: Run, drafted: Run, tolerance: float, lossless: bool = True) -> UnchangedCheck:
    """`lossless`: whether the engine's re-reads of looping pages are the same whatever the drafts."""
    differences = []
    retried_pages = 0
    for page_id, expected in reference.outputs.items():
        got = drafted.outputs[page_id]
        retried = expected.metrics.retried or got.metrics.retried
        retried_pages += retried
        if got.text == expected.text and got.token_ids == expected.token_ids:
            continue
        char_index = first_difference(expected.text, got.text)
        token_index = len(os.path.commonprefix([list(expected.token_ids), list(got.token_ids)]))
        start = max(0, char_index - DIFF_CONTEXT)
        differences.append(Difference(
            page_id=page_id,
            char_index=char_index,
            token_index=token_index,
            reference_excerpt=expected.text[start : char_index + DIFF_CONTEXT],
            drafted_excerpt=got.text[start : char_index + DIFF_CONTEXT],
            reference_gap=gap_at(expected, token_index),
            drafted_gap=gap_at(got, token_index),
            retried=retried,
        ))
    pages = len(reference.outputs)
    return UnchangedCheck(
        drafts=drafted.drafts,
        concurrency=drafted.concurrency,
        reference_score=reference.summary.category_mean.similarity,
        score=drafted.summary.category_mean.similarity,
        identical_pages=pages - len(differences),
        pages=pages,
        differences=tuple(differences),
        tolerance=tolerance,
        retried_pages=retried_pages,
        lossless_retries=lossless,
    )


def speed_row(run: Run, reference: Run) -> SpeedRow:
    spec = run.metrics.spec if run.drafts else None
    base = reference.metrics.tokens_per_s
    return SpeedRow(
        drafts=run.drafts,
        concurrency=run.concurrency,
        pages=run.metrics.pages,
        output_tokens=run.metrics.output_tokens,
        wall_s=run.metrics.wall_s,
        tokens_per_s=run.metrics.tokens_per_s,
        pages_per_s=run.metrics.pages_per_s,
        speedup=run.metrics.tokens_per_s / base if base else 0.0,
        mean_acceptance_length=spec.mean_acceptance_length if spec else None,
        acceptance_per_position=tuple(spec.acceptance_rate_per_position) if spec else (),
    )


def evaluate(
    engine: Engine,
    pages: list[BenchmarkPage],
    images: list[tuple[str, Image.Image]],
    drafts: list[Drafts],
    concurrencies: list[int],
    max_tokens: int,
    scorer: Scorer,
    tolerance: float,
    on_page: ProgressCallback | None = None,
    retry: RetryPreset | None = None,
) -> Evaluation:
    """Every (concurrency, K) run, then the unchanged checks and the speed table against K = 0; `retry`: how
    looping pages are read again (None: not at all)."""
    drafts = draft_order(drafts)
    categories = {page.id: page.category for page in pages}
    references = {page.id: page.reference for page in pages}
    done: dict[tuple[int, int], Run] = {}
    warmup_pages = min(len(images), max(concurrencies), MAX_WARMUP_PAGES)
    warmup_s: dict[int, float] = {}
    for k in drafts:  # K outermost: an engine that fixes K at start (vLLM) restarts once per K
        settings = GenerationSettings(max_tokens=max_tokens, drafts=k, logit_gaps=True)
        started = time.perf_counter()
        for _ in engine.read_many(iter(images[:warmup_pages]), settings, warmup_pages):  # and any restart for K
            pass
        warmup_s[k] = time.perf_counter() - started
        for concurrency in concurrencies:
            done[k, concurrency] = read_run(engine, images, categories, references, settings, concurrency, scorer,
                                            on_page, retry)
    runs, checks, speed = [], [], []
    for concurrency in concurrencies:
        reference = done[0, concurrency]
        for k in drafts:
            runs.append(done[k, concurrency])
            speed.append(speed_row(done[k, concurrency], reference))
            if k:
                checks.append(compare_runs(reference, done[k, concurrency], tolerance, lossless_retries(engine)))
    auto = engine.auto_drafts_report() if AUTO_DRAFTS in drafts else None
    return Evaluation(runs=runs, checks=checks, speed=speed, pages=pages, warmup_s=warmup_s, auto=auto)
