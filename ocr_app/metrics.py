"""Counters for one page and for a run, shared by every engine, the CLI, the UI and the benchmarks.

Terms, used with exactly these meanings everywhere:

* a *draft* is one proposal of up to K tokens by the MTP head (one round);
* *accepted* tokens are draft tokens the main model verified as its own;
* the *bonus* token is the main model's own next token after the accepted
  prefix: every round emits it, so a round emits accepted + 1 tokens;
* the *acceptance length* of a round is accepted + 1 (bonus included), and the
  mean acceptance length is 1 + accepted tokens / drafts;
* `accepted_per_position[j]` counts the drafts whose token at position j+1 was
  accepted; its rate is that count over all drafts (as vLLM reports it);
* a draft token after an accepted stop token is not counted (`counted_drafts`):
  the page had ended, so it was neither accepted nor rejected (vLLM's own
  counters, `engines.spec_counters`, do count it, as a rejection).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


def counted_drafts(num_draft_tokens: int, num_accepted_tokens: int, stop_at: int | None) -> tuple[int, int]:
    """The draft tokens of a round that count, and how many of them were accepted.  `stop_at`: the index of the
    stop token among the round's new tokens (its accepted drafts, then the bonus), None if none.  When an
    accepted draft is the stop token, the drafts after it were checked against logits past the page's end:
    they are dropped, neither accepted nor rejected (at a band's end the head that drafted the stop token at
    position 1 would otherwise be charged two misses at positions 2 and 3)."""
    if stop_at is not None and stop_at < num_accepted_tokens:
        return stop_at + 1, stop_at + 1
    return num_draft_tokens, num_accepted_tokens


@dataclass
class SpecDecodingStats:
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_position: list[int] = field(default_factory=list)

    def observe_draft(self, num_draft_tokens: int, num_accepted_tokens: int) -> None:
        assert 0 <= num_accepted_tokens <= num_draft_tokens
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted_tokens
        if len(self.accepted_per_position) < num_draft_tokens:
            self.accepted_per_position.extend([0] * (num_draft_tokens - len(self.accepted_per_position)))
        for position in range(num_accepted_tokens):
            self.accepted_per_position[position] += 1

    def merge(self, other: SpecDecodingStats) -> None:
        self.num_drafts += other.num_drafts
        self.num_draft_tokens += other.num_draft_tokens
        self.num_accepted_tokens += other.num_accepted_tokens
        width = max(len(self.accepted_per_position), len(other.accepted_per_position))
        self.accepted_per_position = [
            (self.accepted_per_position[j] if j < len(self.accepted_per_position) else 0)
            + (other.accepted_per_position[j] if j < len(other.accepted_per_position) else 0)
            for j in range(width)
        ]

    @property
    def mean_acceptance_length(self) -> float:
        return 1.0 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else 0.0

    @property
    def acceptance_rate_per_position(self) -> list[float]:
        return [count / self.num_drafts for count in self.accepted_per_position] if self.num_drafts else []

    @property
    def draft_acceptance_rate(self) -> float:
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "mean_acceptance_length": round(self.mean_acceptance_length, 4),
            "acceptance_rate_per_position": [round(rate, 4) for rate in self.acceptance_rate_per_position],
        }


@dataclass
class PageMetrics:
    prompt_tokens: int
    output_tokens: int
    wall_s: float
    finish_reason: str  # "stop" (end of sequence) or "length" (hit max tokens)
    drafts: int | str = 0  # K, the number of draft tokens per round; 0 = plain decoding; "auto": chosen per round
    spec: SpecDecodingStats | None = None
    retried: bool = False
    # A part of the page read alone (a band, `ocr_app.regions`) ran to max tokens in a repetition loop: the page's
    # own tail is its last part's, so a loop in a band above it shows only here.
    part_looped: bool = False

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict:
        data = asdict(self)
        data["tokens_per_s"] = round(self.tokens_per_s, 3)
        data["spec"] = self.spec.to_dict() if self.spec is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict) -> PageMetrics:
        """The inverse of `to_dict`: its derived figures are dropped, the counters kept."""
        data = {key: value for key, value in data.items() if key != "tokens_per_s"}
        spec = data.pop("spec")
        if spec is not None:
            spec = SpecDecodingStats(
                num_drafts=spec["num_drafts"],
                num_draft_tokens=spec["num_draft_tokens"],
                num_accepted_tokens=spec["num_accepted_tokens"],
                accepted_per_position=spec["accepted_per_position"],
            )
        return cls(**data, spec=spec)


@dataclass
class RunMetrics:
    """Totals over the pages of a run; wall time is the run's, not the sum of pages'."""

    pages: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    wall_s: float = 0.0
    spec: SpecDecodingStats | None = None

    def observe_page(self, page: PageMetrics) -> None:
        self.pages += 1
        self.prompt_tokens += page.prompt_tokens
        self.output_tokens += page.output_tokens
        if page.spec is not None:
            if self.spec is None:
                self.spec = SpecDecodingStats()
            self.spec.merge(page.spec)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {
            "pages": self.pages,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "wall_s": round(self.wall_s, 3),
            "pages_per_s": round(self.pages_per_s, 4),
            "tokens_per_s": round(self.tokens_per_s, 3),
            "spec": self.spec.to_dict() if self.spec is not None else None,
        }
