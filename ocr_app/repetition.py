"""Degenerate output: a page that ran to max tokens stuck in a repetition loop, read again once.

A loop shows as a tail that repeats with a short period (`| | | |`, the same
line over and over).  Only pages that hit max tokens are suspects: a page that
ended by itself is taken as the model meant it, tables and all.  A page read as
bands is a suspect when any band is (`PageMetrics.part_looped`).  Detection works
on token ids, so it applies to every engine alike (`RetryDegenerate` for single
pages, `ocr_app.pipeline` in bulk).

Greedy decoding would walk into the same loop again, so the retry changes how
tokens are chosen, in one of two ways:

* *lossless* (engines with `bans_loops`: hf, and vLLM with the plugin
  `engines.vllm_loop_ban`): greedy decoding in which a token that would make the
  output end in a loop (`loop_tokens`, a pure function of the output so far) is
  never chosen.  Plain decoding applies the ban to each next token and
  speculative decoding at every verified position, so a retried page reads the
  same text with and without drafts, and the retry cannot loop again;
* *sampled* (remote `vllm serve` endpoints, which take no such flag): the
  preset's retry temperature, top-p and seed.  Its text depends on the drafts,
  and `ocr-eval` lists such pages apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from PIL import Image

from ocr_app.config import RetryPreset
from ocr_app.engines.protocol import Engine, GenerationSettings, PageText, TextCallback, WrappedEngine

# A loop is a period of at most MAX_PERIOD tokens repeated at least MIN_REPEATS
# times, spanning at least MIN_SPAN tokens (so `aaaa` is not a loop yet).
MAX_PERIOD = 64
MIN_REPEATS = 4
MIN_SPAN = 24


def repetition_period(token_ids: Sequence[int]) -> int | None:
    """The period of the loop the sequence ends in, or None if its tail does not repeat."""
    for period in range(1, MAX_PERIOD + 1):
        span = max(period * MIN_REPEATS, MIN_SPAN)
        if span > len(token_ids):
            break
        tail = token_ids[len(token_ids) - span :]
        if all(tail[i] == tail[i - period] for i in range(period, span)):
            return period
    return None


def loop_tokens(token_ids: Sequence[int]) -> set[int]:
    """The tokens that would make the output end in a loop: t is among them exactly when
    `repetition_period([*token_ids, t])` is not None (for each period, the token one period back,
    where the rest of that tail already repeats)."""
    banned: set[int] = set()
    length = len(token_ids)
    for period in range(1, MAX_PERIOD + 1):
        span = max(period * MIN_REPEATS, MIN_SPAN)
        if span > length + 1:
            break
        start = length - span + 1  # the tail with t appended is token_ids[start:] + [t]
        if all(token_ids[i] == token_ids[i - period] for i in range(start + period, length)):
            banned.add(token_ids[length - period])
    return banned


def is_degenerate(page: PageText) -> bool:
    """Whether the page ran to max tokens stuck in a loop: at its own end, or in one of its parts (a band of a
    page read by regions, whose loop a later band's text would hide)."""
    return page.metrics.part_looped or (
        page.metrics.finish_reason == "length" and repetition_period(page.token_ids) is not None
    )


def retry_settings(settings: GenerationSettings, retry: RetryPreset, engine: Engine) -> GenerationSettings:
    """How a looping page is read again on `engine`: lossless where it bans loops, else sampled."""
    if lossless_retries(engine):
        return replace(settings, ban_loops=True)
    return replace(settings, temperature=retry.temperature, top_p=retry.top_p, seed=retry.seed)


def lossless_retries(engine: Engine) -> bool:
    """Whether `engine` re-reads a looping page with the same text whatever the drafts."""
    return bool(getattr(engine, "bans_loops", False))


def as_retry(first: PageText, second: PageText) -> PageText:
    """The second reading, charged with the time and drafting work of both."""
    spec = second.metrics.spec
    if first.metrics.spec is not None and spec is not None:
        spec = replace(spec, accepted_per_position=list(spec.accepted_per_position))
        spec.merge(first.metrics.spec)
    metrics = replace(second.metrics, wall_s=first.metrics.wall_s + second.metrics.wall_s, spec=spec, retried=True)
    return replace(second, metrics=metrics)


class RetryDegenerate(WrappedEngine):
    """Wraps any engine: a page read alone (`read`) that ends in a repetition loop is read once more
    with `retry_settings`.  The retry is not streamed: the caller has seen the looping text and
    gets the retried text in the returned page.  `read_many` is the engine's own: in bulk the
    pipeline retries looping pages after the first pass, so that a stop can leave them unread.
    """

    def __init__(self, engine: Engine, retry: RetryPreset):
        super().__init__(engine)
        self.retry = retry

    def read(self, image: Image.Image, settings: GenerationSettings, on_text: TextCallback | None = None) -> PageText:
        page = self.engine.read(image, settings, on_text)
        if not is_degenerate(page):
            return page
        return as_retry(page, self.engine.read(image, retry_settings(settings, self.retry, self.engine)))
