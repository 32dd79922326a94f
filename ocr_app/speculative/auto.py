"""`--drafts auto`: K chosen from the acceptance per draft position and the cost of a round, both measured.

A round with K drafts emits on average 1 + A_1 + ... + A_K tokens, A_i being the probability that draft
positions 1..i are all accepted (the bonus token always comes), and costs one main-model forward over K+1
tokens plus K head steps.  The chosen K maximises the expected rate:

    rate(K) = (1 + sum_{i<=K} A_i) / (verify(K+1) + K * draft)        K = 0..7; K = 0 is plain decoding

With B sequences in one forward (the hf engine's batched rounds) a round verifies B*(K+1) tokens and emits
B times as many.  Inputs:

* A_i = c_1 * ... * c_i, c_j the *conditional* acceptance at position j (drafted after positions 1..j-1
  were accepted: accepted or not), counted over the run's rounds and blended with the model preset's prior
  (`[auto_drafts]`, `AutoDraftsPreset`), which weighs as much as `prior_weight` rounds at each position, so
  that the first rounds do not swing K.  Without a prior every position starts at 1 weighing one round
  (optimism: K starts high and comes down as rejections are counted, rather than never trying drafts);
* verify(T) and draft: timed when the engine first drafts with auto (`costs.calibrate`: verify passes over
  T = 1, 2, 4, 8 new tokens after a dummy page of the real shapes, interpolated; one head step), plus what
  a round costs beyond them (Python, verification, rollback, the head's feed: an additive overhead),
  measured from the wall time of the run's rounds: the median of measured minus predicted time over the
  last rounds at that K once K has `MIN_ROUNDS` of them, else over the last rounds at any K.

Probes: one round in `PROBE_EVERY` runs at a neighbour of the chosen K (K-1 and K+1 in turn), so that
the neighbours' own round times and the next position's acceptance are measured rather than borrowed.
Without them the chooser sticks where it starts: a K never run gets the overhead of the K that was run,
and on real pages (bench_drafts_auto, step-40 002 head) the overhead at K=2 (the head's longer feed and
verification) priced K=1 too high, so auto ran K=2 at 94% of K=1's rate.  At K = 0 the probe drafts one
token, which also notices acceptance that rose.  A probe costs at most the gap between the best rate and
its neighbour's, on one round in `PROBE_EVERY`.  Each choice is an argmax over 8 K, microseconds against
a round's milliseconds.
"""

from __future__ import annotations

import statistics
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass


from ocr_app.config import AutoDraftsPreset, ModelPreset
from ocr_app.errors import ConfigError

MAX_DRAFTS = 7
# A round time measured at K counts for K alone once K has this many rounds among the last ROUND_WINDOW.
MIN_ROUNDS = 8
ROUND_WINDOW = 64
PROBE_EVERY = 16  # one round in this many runs at a neighbour of the chosen K, so its cost stays measured


@dataclass(frozen=True)
class DraftCosts:
    """Seconds of one main-model forward over T new tokens (`verify_s`, by T, batch 1) and of one head step."""

    verify_s: dict[int, float]
    draft_s: float

    def verify(self, tokens: float) -> float:
        """verify(T), piecewise linear between the timed T and extended along the last segment beyond them."""
        points = sorted(self.verify_s.items())
        if len(points) == 1:
            return points[0][1] * tokens / points[0][0]
        for (t0, s0), (t1, s1) in zip(points, points[1:]):
            if tokens <= t1:
                break
        return s0 + (s1 - s0) * (tokens - t0) / (t1 - t0)

    def round_s(self, k: int, batch: int = 1) -> float:
        """A round of K drafts for `batch` sequences: one verify over batch*(K+1) tokens, K head steps (a head
        step over B sequences taken to grow as a main forward over B tokens does)."""
        return self.verify(batch * (k + 1)) + k * self.draft_s * self.verify(batch) / self.verify(1)

    def to_dict(self) -> dict:
        return {"verify_ms": {str(t): round(s * 1000, 4) for t, s in sorted(self.verify_s.items())},
                "draft_ms": round(self.draft_s * 1000, 4)}


def recorded_costs(preset: AutoDraftsPreset) -> DraftCosts | None:
    """The preset's recorded costs (ms) as `DraftCosts`, None where it has none."""
    if preset.verify_cost is None or preset.draft_cost is None:
        return None
    return DraftCosts({t: ms / 1000 for t, ms in preset.verify_cost.items()}, preset.draft_cost / 1000)


def prior_conditional(acceptance: Sequence[float]) -> list[float] | None:
    """Conditional acceptance c_1..c_7 from acceptance per position A_1..A_n (c_i = A_i / A_{i-1}), the last
    ratio carried on past position n; None for no prior."""
    if not acceptance:
        return None
    conditional = [acceptance[0]] + [later / earlier if earlier else 0.0
                                     for earlier, later in zip(acceptance, acceptance[1:])]
    return (conditional + [conditional[-1]] * MAX_DRAFTS)[:MAX_DRAFTS]


def expected_rates(acceptance: Sequence[float], round_s: Callable[[int], float], batch: int = 1) -> list[float]:
    """Expected tokens per second at K = 0..len(acceptance): acceptance[i] = A_{i+1}, round_s(K) a round's seconds."""
    return [batch * (1 + sum(acceptance[:k])) / round_s(k) for k in range(len(acceptance) + 1)]


def best_k(rates: Sequence[float]) -> int:
    """The K of the highest rate; the smaller K on a tie (fewer drafts, less wasted work if they fail)."""
    return max(range(len(rates)), key=lambda k: (rates[k], -k))


@dataclass(frozen=True)
class DraftChoice:
    """One choice of K and what it was made from."""

    k: int
    acceptance: tuple[float, ...]  # A_1..A_7 it was chosen from
    round_ms: tuple[float, ...]  # expected ms of a round at K = 0..7 (costs plus measured overhead)
    rates: tuple[float, ...]  # expected tok/s at K = 0..7
    batch: int = 1

    def why(self) -> str:
        runner_up = best_k([rate if k != self.k else float("-inf") for k, rate in enumerate(self.rates)])
        return (f"K={self.k}: expected {self.rates[self.k]:.1f} tok/s decoding (mean acceptance length "
                f"{1 + sum(self.acceptance[:self.k]):.2f}, round {self.round_ms[self.k]:.2f} ms); next best "
                f"K={runner_up} at {self.rates[runner_up]:.1f} tok/s")

    def to_dict(self) -> dict:
        return {"k": self.k, "batch": self.batch, "acceptance": [round(a, 4) for a in self.acceptance],
                "round_ms": [round(ms, 4) for ms in self.round_ms], "expected_tokens_per_s":
                [round(rate, 2) for rate in self.rates], "why": self.why()}


def choose(acceptance: Sequence[float], costs: DraftCosts, batch: int = 1,
           overhead: Callable[[int], float] = lambda k: 0.0) -> DraftChoice:
    """The K in 0..7 of the highest expected rate; `overhead(K)`: seconds a round at K costs beyond `costs`."""
    round_s = [costs.round_s(k, batch) + overhead(k) for k in range(MAX_DRAFTS + 1)]
    rates = expected_rates(acceptance[:MAX_DRAFTS], lambda k: round_s[k], batch)
    return DraftChoice(best_k(rates), tuple(acceptance[:MAX_DRAFTS]), tuple(s * 1000 for s in round_s),
                       tuple(rates), batch)


@dataclass
class AcceptanceCounts:
    """Per draft position: rounds that drafted it after accepting every position before it (`reached`), and
    rounds that accepted it too (`accepted`)."""

    reached: list[int]
    accepted: list[int]

    @classmethod
    def empty(cls) -> AcceptanceCounts:
        return cls([0] * MAX_DRAFTS, [0] * MAX_DRAFTS)

    def observe(self, num_drafts: int, num_accepted: int) -> None:
        assert 0 <= num_accepted <= num_drafts <= MAX_DRAFTS
        for position in range(min(num_accepted + 1, num_drafts)):
            self.reached[position] += 1
        for position in range(num_accepted):
            self.accepted[position] += 1

    def acceptance(self, prior: list[float] | None, weight: int) -> list[float]:
        """A_1..A_7: conditional rates blended with the prior (or with 1 weighing one round), chained."""
        rates, chained = [], 1.0
        for position in range(MAX_DRAFTS):
            if prior is None:
                conditional = (self.accepted[position] + 1) / (self.reached[position] + 1)
            else:
                conditional = (self.accepted[position] + weight * prior[position]) / (self.reached[position] + weight)
            chained *= conditional
            rates.append(chained)
        return rates


@dataclass(frozen=True)
class AutoDraftsReport:
    """What `--drafts auto` did over a run: the K of its rounds and sequences, and its last choice's grounds."""

    source: str  # where the inputs came from, in words
    costs: DraftCosts  # as timed (or recorded), without the measured overhead
    prior: tuple[float, ...]  # the preset's acceptance per position (empty: none)
    last: DraftChoice  # the last choice, from everything measured by then
    rounds_by_k: dict[int, int]
    sequences_by_k: dict[int, int]  # sequences (bands, pages) by the K most of their rounds had
    measured_acceptance: tuple[float, ...]  # the run's own A_i, unblended (positions never drafted: absent)

    @property
    def k_summary(self) -> str:
        total = sum(self.rounds_by_k.values())
        if not total:
            return f"K={self.last.k}"
        return ", ".join(f"K={k} {100 * count / total:.0f}%" for k, count in sorted(self.rounds_by_k.items()))

    def to_dict(self) -> dict:
        return {"source": self.source, "costs": self.costs.to_dict(), "prior": list(self.prior),
                "last": self.last.to_dict(), "rounds_by_k": {str(k): n for k, n in sorted(self.rounds_by_k.items())},
                "sequences_by_k": {str(k): n for k, n in sorted(self.sequences_by_k.items())},
                "measured_acceptance": [round(a, 4) for a in self.measured_acceptance]}

    def markdown(self) -> list[str]:
        """The "Drafts auto" section of a report."""
        rates, rounds = self.last.rates, sum(self.rounds_by_k.values())
        if rounds:
            chosen = f"K chosen per round: {self.k_summary} of {rounds} rounds"
            if self.sequences_by_k:
                chosen += "; sequences (bands, pages) by the K of most of their rounds: " + ", ".join(
                    f"K={k}: {n}" for k, n in sorted(self.sequences_by_k.items()))
        else:
            chosen = f"K fixed before the engine started: K={self.last.k}"
        lines = ["## Drafts auto", "", f"{chosen}. Inputs: {self.source}.", "", f"Last choice: {self.last.why()}.", "",
                 "| K | acceptance A_K (blended) | measured | round (ms) | expected tok/s |", "|---:|---:|---:|---:|---:|"]
        for k, rate in enumerate(rates):
            blended = f"{100 * self.last.acceptance[k - 1]:.0f}%" if k else "-"
            measured = (f"{100 * self.measured_acceptance[k - 1]:.0f}%"
                        if 0 < k <= len(self.measured_acceptance) else "-")
            mark = " **chosen**" if k == self.last.k else ""
            lines.append(f"| {k}{mark} | {blended} | {measured} | {self.last.round_ms[k]:.2f} | {rate:.1f} |")
        costs = ", ".join(f"T={t} {s * 1000:.2f}" for t, s in sorted(self.costs.verify_s.items()))
        prior = "/".join(f"{a:.2f}" for a in self.prior) or "none (each position starts at 1, weighing one round)"
        lines += ["", f"Costs as timed (the rounds above add the overhead measured from the run's rounds): main-model forward over T tokens (ms) {costs}; "
                  f"head step {self.costs.draft_s * 1000:.2f} ms. Prior acceptance: {prior}.", ""]
        return lines


class AutoDrafts:
    """The running chooser of one engine: `choose` before a round, `observe_round` after it."""

    def __init__(self, preset: AutoDraftsPreset, costs: DraftCosts, source: str):
        self.preset = preset
        self.costs = costs
        self.source = source
        self.prior = prior_conditional(preset.acceptance)
        self.counts = AcceptanceCounts.empty()
        # measured minus predicted seconds of the last rounds, per K and over all K
        self.overheads: dict[int, deque[float]] = {k: deque(maxlen=ROUND_WINDOW) for k in range(MAX_DRAFTS + 1)}
        self.all_overheads: deque[float] = deque(maxlen=ROUND_WINDOW)
        self.rounds_by_k: Counter[int] = Counter()
        self.sequences_by_k: Counter[int] = Counter()
        self.last: DraftChoice | None = None
        self.choices = 0

    def _overhead(self, k: int) -> float:
        own = self.overheads[k]
        if len(own) >= MIN_ROUNDS:
            return statistics.median(own)
        return statistics.median(self.all_overheads) if self.all_overheads else 0.0

    def choose(self, batch: int = 1) -> int:
        """K for the next round of `batch` sequences: the best expected rate, or now and then a neighbour of it."""
        acceptance = self.counts.acceptance(self.prior, self.preset.prior_weight)
        self.last = choose(acceptance, self.costs, batch, self._overhead)
        self.choices += 1
        if self.choices % PROBE_EVERY:
            return self.last.k
        below = (self.choices // PROBE_EVERY) % 2 == 1  # probes alternate below and above
        if self.last.k == MAX_DRAFTS or (below and self.last.k > 0):
            return self.last.k - 1
        return self.last.k + 1

    def observe_round(self, k: int, batch: int, wall_s: float, drafted: Sequence[tuple[int, int]]) -> None:
        """A round of K drafts for `batch` sequences took `wall_s`; `drafted`: (drafts verified, accepted) per
        sequence that drafted (a sequence near its token limit verifies fewer)."""
        for num_drafts, num_accepted in drafted:
            self.counts.observe(num_drafts, num_accepted)
        overhead = wall_s - self.costs.round_s(k, batch)
        self.overheads[k].append(overhead)
        self.all_overheads.append(overhead)
        self.rounds_by_k[k] += 1

    def observe_sequence(self, rounds_by_k: Counter[int]) -> None:
        if rounds_by_k:
            self.sequences_by_k[max(rounds_by_k, key=lambda k: (rounds_by_k[k], -k))] += 1

    def report(self) -> AutoDraftsReport:
        if self.last is None:
            self.choose()
        measured = [accepted / reached if reached else None
                    for reached, accepted in zip(self.counts.reached, self.counts.accepted)]
        chained, acceptance = 1.0, []
        for rate in measured:
            if rate is None:
                break
            chained *= rate
            acceptance.append(chained)
        return AutoDraftsReport(self.source, self.costs, tuple(self.preset.acceptance), self.last,
                                dict(self.rounds_by_k), dict(self.sequences_by_k), tuple(acceptance))


def fixed_choice(model: ModelPreset) -> tuple[int, AutoDraftsReport]:
    """K for an engine that fixes it before it starts (vLLM): from the preset's prior and recorded costs."""
    costs = recorded_costs(model.auto_drafts)
    if costs is None:
        raise ConfigError(
            f"--drafts auto on vLLM fixes K before it starts, from the preset's [auto_drafts] acceptance and "
            f"recorded costs (verify_cost, draft_cost), and {model.name} has no costs recorded: give a fixed "
            "--drafts K, or record them in its preset")
    chooser = AutoDrafts(model.auto_drafts, costs, "the preset's acceptance and recorded costs (K fixed at start)")
    return chooser.choose(), chooser.report()
