"""The engine protocol: what every backend (and every wrapper of one) offers, and the types it speaks.

An engine reads page images and returns, per page, the text plus its metrics.
`read` serves one page at a time and can stream text as it is produced;
`read_many` keeps up to `concurrency` pages in flight and yields results in
completion order, each tagged with the key it came with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Hashable, Literal, Protocol, TypeVar

from PIL import Image

from ocr_app.errors import ConfigError
from ocr_app.metrics import PageMetrics

if TYPE_CHECKING:
    from ocr_app.speculative.auto import AutoDraftsReport

EngineName = Literal["hf", "vllm"]
# `drafts = "auto"`: K chosen by the engine from measured acceptance and costs (`ocr_app.speculative.auto`).
AUTO_DRAFTS = "auto"
Drafts = int | Literal["auto"]
ENGINE_NAMES: tuple[str, ...] = ("hf", "vllm")
Key = TypeVar("Key", bound=Hashable)
TextCallback = Callable[[str], None]


@dataclass(frozen=True)
class GenerationSettings:
    max_tokens: int
    drafts: Drafts = 0  # K draft tokens per round from the MTP head; 0 = plain decoding; "auto": the engine's choice
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int | None = None
    # Never choose a token that would make the output end in a repetition loop (`repetition.loop_tokens`);
    # only engines with `bans_loops = True` honour it (the lossless re-read of a looping page).
    ban_loops: bool = False
    # Record the main model's top-2 logit gap before each output token (`PageText.top2_gaps`): `ocr-eval`
    # shows it where drafted output first differs, to tell a near-tie from a bug.
    logit_gaps: bool = False

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ConfigError("max tokens must be at least 1")
        if self.drafts != AUTO_DRAFTS and not (type(self.drafts) is int and 0 <= self.drafts <= 7):
            raise ConfigError(f"drafts must be {AUTO_DRAFTS} or between 0 and 7, got {self.drafts}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ConfigError("need temperature >= 0 and 0 < top_p <= 1")


def parse_drafts(text: str) -> Drafts:
    """`--drafts`' value: a whole number 0-7 or `auto`."""
    value = text.strip().lower()
    if value == AUTO_DRAFTS:
        return AUTO_DRAFTS
    if not value.isdigit() or not 0 <= int(value) <= 7:
        raise ConfigError(f"--drafts takes {AUTO_DRAFTS} or a whole number 0-7, got '{text}'")
    return int(value)


@dataclass(frozen=True)
class PageText:
    """What an engine returns for one page."""

    text: str
    # The output's token ids, stop token excluded; a page read in parts (`regions.ReadByRegions`) joins its parts'
    # ids with `regions.reader.PART_END` (-1) where a part stopped by itself.
    token_ids: tuple[int, ...]
    metrics: PageMetrics
    # With `logit_gaps`: per output token (stop token included), the main model's largest logit minus its
    # second largest where it chose that token; None when not asked for or the engine cannot tell.
    top2_gaps: tuple[float, ...] | None = None


class Engine(Protocol):
    name: str

    def read(self, image: Image.Image, settings: GenerationSettings, on_text: TextCallback | None = None) -> PageText:
        """Read one page; `on_text` receives each new piece of text as it is produced."""
        ...

    def read_many(
        self, pages: Iterable[tuple[Key, Image.Image]], settings: GenerationSettings, concurrency: int
    ) -> Iterator[tuple[Key, PageText]]:
        """Read many pages, up to `concurrency` at once; results come in completion order."""
        ...

    def auto_drafts_report(self) -> AutoDraftsReport | None:
        """What drafts "auto" chose and why over the engine's reads so far; None if it never read with auto."""
        ...

    def close(self) -> None: ...


class WrappedEngine:
    """Base of an engine that wraps another to change how pages are read: anything else an engine offers
    (e.g. `spec_totals`, `drafts`, `read_many` where not overridden) is the wrapped engine's."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.name = engine.name

    def __getattr__(self, name: str):
        return getattr(self.engine, name)

    def close(self) -> None:
        self.engine.close()
