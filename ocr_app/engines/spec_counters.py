"""vLLM's speculative-decoding counters, read into `SpecDecodingStats`.

vLLM counts in two places and both are read here, never its log lines:

* per request, when started with `per_request_spec_decode_metrics="summary"`:
  a histogram of accepted draft tokens per verify round (index j = j tokens of
  the draft accepted) and the number of draft tokens proposed;
* per engine, as Prometheus counters `vllm:spec_decode_num_drafts`,
  `..._num_draft_tokens`, `..._num_accepted_tokens` and
  `..._num_accepted_tokens_per_pos` (one per draft position), in-process via
  `LLM.get_metrics()` and remotely on a server's `/metrics`.  These only grow,
  so a run's figures are the difference of two snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from ocr_app.metrics import SpecDecodingStats

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"


def from_acceptance_histogram(histogram: list[int], num_draft_tokens: int) -> SpecDecodingStats:
    """One request's stats from vLLM's histogram of accepted tokens per round.

    A round that accepted j tokens accepted positions 1..j, so position p was
    accepted by every round with j > p.
    """
    accepted_per_position = [sum(histogram[p + 1 :]) for p in range(len(histogram) - 1)]
    return SpecDecodingStats(
        num_drafts=sum(histogram),
        num_draft_tokens=num_draft_tokens,
        num_accepted_tokens=sum(j * count for j, count in enumerate(histogram)),
        accepted_per_position=accepted_per_position,
    )


def from_engine_metrics(metrics: Iterable) -> SpecDecodingStats:
    """Totals from `LLM.get_metrics()` (vllm.v1.metrics.reader Counter/Vector objects)."""
    stats = SpecDecodingStats()
    for metric in metrics:
        if metric.name == DRAFTS:
            stats.num_drafts += int(metric.value)
        elif metric.name == DRAFT_TOKENS:
            stats.num_draft_tokens += int(metric.value)
        elif metric.name == ACCEPTED_TOKENS:
            stats.num_accepted_tokens += int(metric.value)
        elif metric.name == ACCEPTED_PER_POSITION:
            stats.merge(SpecDecodingStats(accepted_per_position=[int(v) for v in metric.values]))
    return stats


def from_prometheus_text(text: str) -> SpecDecodingStats:
    """Totals from a server's `/metrics` page (summed over engines and models)."""
    stats = SpecDecodingStats()
    per_position: dict[int, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue  # `_created` timestamps
            value = int(sample.value)
            if family.name == DRAFTS:
                stats.num_drafts += value
            elif family.name == DRAFT_TOKENS:
                stats.num_draft_tokens += value
            elif family.name == ACCEPTED_TOKENS:
                stats.num_accepted_tokens += value
            elif family.name == ACCEPTED_PER_POSITION:
                position = int(sample.labels["position"])
                per_position[position] = per_position.get(position, 0) + value
    stats.accepted_per_position = [per_position.get(p, 0) for p in range(max(per_position, default=-1) + 1)]
    return stats


def difference(after: SpecDecodingStats, before: SpecDecodingStats) -> SpecDecodingStats:
    """What happened between two snapshots of the same counters."""
    width = max(len(after.accepted_per_position), len(before.accepted_per_position))
    padded_before = before.accepted_per_position + [0] * (width - len(before.accepted_per_position))
    padded_after = after.accepted_per_position + [0] * (width - len(after.accepted_per_position))
    return SpecDecodingStats(
        num_drafts=after.num_drafts - before.num_drafts,
        num_draft_tokens=after.num_draft_tokens - before.num_draft_tokens,
        num_accepted_tokens=after.num_accepted_tokens - before.num_accepted_tokens,
        accepted_per_position=[a - b for a, b in zip(padded_after, padded_before)],
    )
