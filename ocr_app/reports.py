"""Evaluation reports: `report.md` (tables), `report.json` (every figure and per-page output), `report.png` (chart)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ocr_app.evaluation import (
    NEAR_TIE_GAP,
    Difference,
    Evaluation,
    Run,
    SpeedRow,
    UnchangedCheck,
)
from ocr_app.engines.protocol import AUTO_DRAFTS, Drafts
from ocr_app.outputs import write_atomic
from ocr_app.scoring import PageScore, ScoreSummary

REPORT_FILES = ("report.md", "report.json", "report.png")


@dataclass(frozen=True)
class BaselineResult:
    name: str  # "tesseract 5.3.0"
    texts: dict[str, str]
    scores: dict[str, PageScore]
    summary: ScoreSummary
    wall_s: float


def setup_name(drafts: Drafts) -> str:
    if drafts == AUTO_DRAFTS:
        return "head, auto drafts"
    return "No MTP" if drafts == 0 else f"head, {drafts} draft{'s' if drafts > 1 else ''}"


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%"


def render_markdown(evaluation: Evaluation, info: dict, baseline: BaselineResult | None, skipped: str | None) -> str:
    lines = [
        "# TurkishOCR-Bench evaluation",
        "",
        f"Model `{info['model']}` on engine `{info['engine']}`, {info['pages']} pages in {info['categories']} "
        f"categories from `{info['data']}`; engine start {info['engine_start_s']:.1f} s (not in any timing); "
        f"max {info['max_tokens']} tokens per page.",
        "",
        "Score: 100 x (1 - normalised edit distance) on normalised text, mean of the category means "
        "(page mean beside it); see `ocr_app/scoring.py`.",
        "",
        "## Output unchanged",
        "",
        "| Setup | Concurrency | Score | Page mean | CER | WER | Change vs no MTP | Identical pages | Check |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    checks = {(c.drafts, c.concurrency): c for c in evaluation.checks}
    for run in evaluation.runs:
        check = checks.get((run.drafts, run.concurrency))
        summary = run.summary
        change = f"{check.score_delta:+.2f}" if check else ""
        identical = f"{check.identical_pages}/{check.pages} ({_percent(check.identical_share)})" if check else ""
        verdict = ("pass" if check.passed else f"FAIL (tolerance {check.tolerance})") if check else "reference"
        lines.append(
            f"| {setup_name(run.drafts)} | {run.concurrency} | {summary.category_mean.similarity:.2f} | "
            f"{summary.page_mean.similarity:.2f} | {summary.page_mean.cer:.4f} | {summary.page_mean.wer:.4f} | "
            f"{change} | {identical} | {verdict} |"
        )
    if baseline is not None:
        lines.append(
            f"| {baseline.name} (baseline) | - | {baseline.summary.category_mean.similarity:.2f} | "
            f"{baseline.summary.page_mean.similarity:.2f} | {baseline.summary.page_mean.cer:.4f} | "
            f"{baseline.summary.page_mean.wer:.4f} | | | |"
        )
    if baseline is not None:
        rate = len(baseline.texts) / baseline.wall_s if baseline.wall_s else 0.0
        lines += ["", f"{baseline.name} read the pages at their original resolution in {baseline.wall_s:.1f} s "
                  f"({rate:.2f} pages/s, one process per core)."]
    if skipped:
        lines += ["", f"Baseline skipped: {skipped}."]
    lines += _retry_note(evaluation.checks)
    lines += ["", *_category_table(evaluation.runs, baseline), "", *speed_tables(evaluation.speed)]
    warmups = ", ".join(f"K={k} {seconds:.1f} s" for k, seconds in evaluation.warmup_s.items())
    lines += [f"Warm-up per K (a few pages, plus any engine restart for that K; not timed): {warmups}.", ""]
    lines += evaluation.auto.markdown() if evaluation.auto is not None else []
    lines += _difference_list(evaluation.checks)
    return "\n".join(lines) + "\n"


def _category_table(runs: list[Run], baseline: BaselineResult | None) -> list[str]:
    first_concurrency = runs[0].concurrency
    shown = [run for run in runs if run.concurrency == first_concurrency]
    header = ["Category", "Pages"] + [setup_name(run.drafts) for run in shown] + ([baseline.name] if baseline else [])
    lines = [f"## Score by category (concurrency {first_concurrency})", "", "| " + " | ".join(header) + " |",
             "|---|" + "---:|" * (len(header) - 1)]
    summaries = [run.summary for run in shown] + ([baseline.summary] if baseline else [])
    for category, count in shown[0].summary.pages_per_category.items():
        cells = [f"{s.per_category[category].similarity:.2f}" for s in summaries]
        lines.append(f"| {category} | {count} | " + " | ".join(cells) + " |")
    cells = [f"**{s.category_mean.similarity:.2f}**" for s in summaries]
    lines.append(f"| **mean of categories** | {shown[0].summary.pages} | " + " | ".join(cells) + " |")
    return lines


def speed_tables(rows: list[SpeedRow]) -> list[str]:
    lines = ["## Speed", "", "Output tokens per second and pages per second over each run's wall time "
             "(warm-up excluded); speedup over no MTP at the same concurrency.", ""]
    for concurrency in sorted({row.concurrency for row in rows}):
        lines += [f"Concurrency {concurrency}:", "", "| Setup | tok/s | pages/s | Speedup | Mean acceptance length |",
                  "|---|---:|---:|---:|---:|"]
        for row in (r for r in rows if r.concurrency == concurrency):
            length = f"{row.mean_acceptance_length:.2f}" if row.mean_acceptance_length is not None else "-"
            lines.append(f"| {setup_name(row.drafts)} | {row.tokens_per_s:.1f} | {row.pages_per_s:.3f} | "
                         f"{row.speedup:.2f}x | {length} |")
        lines.append("")
    drafted = [row for row in rows if row.drafts]
    if drafted:
        width = max(len(row.acceptance_per_position) for row in drafted)
        lines += ["## Acceptance by draft position", "",
                  "| Setup | Concurrency | " + " | ".join(str(p) for p in range(1, width + 1)) + " |",
                  "|---|---:|" + "---:|" * width]
        for row in drafted:
            cells = [_percent(rate) for rate in row.acceptance_per_position]
            cells += ["-"] * (width - len(cells))
            lines.append(f"| {setup_name(row.drafts)} | {row.concurrency} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _retry_note(checks: list[UnchangedCheck]) -> list[str]:
    retried = max((check.retried_pages for check in checks), default=0)
    if not retried:
        return []
    if all(check.lossless_retries for check in checks):
        note = (f"{retried} page(s) ran into a repetition loop and were read again greedily with loops banned, "
                "the same way with and without drafts: they count in the check like any page.")
    else:
        note = (f"{retried} page(s) ran into a repetition loop and were read again sampled (this engine cannot "
                "ban loops exactly with drafts), so their text depends on the drafts by design: they count in the "
                "check, and are listed apart below.")
    return ["", note]


def _difference_list(checks: list[UnchangedCheck]) -> list[str]:
    differing = [(check, difference) for check in checks for difference in check.differences]
    if not differing:
        return []
    lines = []
    for title, sampled in (("Pages whose output differs from no MTP", False),
                           ("Pages re-read sampled after a repetition loop whose output differs from no MTP", True)):
        listed = [(c, d) for c, d in differing if (d.retried and not c.lossless_retries) == sampled]
        if not listed:
            continue
        lines += [f"## {title}", ""]
        if not sampled:
            lines += [(f"Top-2 gap: the main model's largest logit minus its second largest at the first differing "
                       f"token, without drafts / with them; under {NEAR_TIE_GAP} is a near-tie, where rounding may "
                       "pick either token; a wide gap points at a bug."), ""]
        lines += [_difference_line(check, difference) for check, difference in listed] + [""]
    return lines


def _difference_line(check: UnchangedCheck, difference: Difference) -> str:
    gaps = " / ".join("n/a" if gap is None else f"{gap:.3f}" for gap in (difference.reference_gap, difference.drafted_gap))
    tie = " (near-tie)" if difference.near_tie else ""
    return (
        f"- {setup_name(check.drafts)}, concurrency {check.concurrency}, `{difference.page_id}`: first differs at "
        f"character {difference.char_index} (token {difference.token_index}), top-2 gap {gaps}{tie}: "
        f"`{_inline(difference.reference_excerpt)}` vs `{_inline(difference.drafted_excerpt)}`"
    )


def _inline(text: str) -> str:
    return text.replace("\n", "\\n").replace("`", "'")


def render_json(evaluation: Evaluation, info: dict, baseline: BaselineResult | None, skipped: str | None) -> str:
    def scores(score: PageScore) -> dict:
        return {"similarity": round(score.similarity, 3), "cer": round(score.cer, 5), "wer": round(score.wer, 5)}

    pages = []
    for page in evaluation.pages:
        entry = {"id": page.id, "category": page.category, "source": page.source, "reference": page.reference,
                 "runs": []}
        for run in evaluation.runs:
            output = run.outputs[page.id]
            entry["runs"].append({"drafts": run.drafts, "concurrency": run.concurrency, "text": output.text,
                                  "score": scores(run.scores[page.id]), "metrics": output.metrics.to_dict()})
        if baseline is not None:
            entry["baseline"] = {"text": baseline.texts[page.id], "score": scores(baseline.scores[page.id])}
        pages.append(entry)
    document = {
        "info": info,
        "runs": [{"drafts": run.drafts, "concurrency": run.concurrency, "setup": setup_name(run.drafts),
                  "score": run.summary.to_dict(), "metrics": run.metrics.to_dict()} for run in evaluation.runs],
        "unchanged_checks": [{
            "drafts": check.drafts, "concurrency": check.concurrency, "reference_score": round(check.reference_score, 3),
            "score": round(check.score, 3), "score_delta": round(check.score_delta, 4), "tolerance": check.tolerance,
            "passed": check.passed, "identical_pages": check.identical_pages, "pages": check.pages,
            "retried_pages": check.retried_pages, "lossless_retries": check.lossless_retries,
            "differences": [{**difference.__dict__, "near_tie": difference.near_tie} for difference in check.differences],
        } for check in evaluation.checks],
        "speed": [{**row.__dict__, "setup": setup_name(row.drafts),
                   "acceptance_per_position": list(row.acceptance_per_position)} for row in evaluation.speed],
        "baseline": None if baseline is None else {
            "name": baseline.name, "score": baseline.summary.to_dict(), "wall_s": round(baseline.wall_s, 3),
            "pages_per_s": round(len(baseline.texts) / baseline.wall_s, 4) if baseline.wall_s else 0.0,
        },
        "warmup_s": {str(k): round(seconds, 3) for k, seconds in evaluation.warmup_s.items()},
        "drafts_auto": evaluation.auto.to_dict() if evaluation.auto is not None else None,
        "baseline_skipped": skipped,
        "pages": pages,
    }
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n"


def render_chart(evaluation: Evaluation, path: Path) -> None:
    """Speedup vs drafts (one line per concurrency) and acceptance vs draft position (one line per run)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for concurrency in sorted({row.concurrency for row in evaluation.speed}):
        rows = [row for row in evaluation.speed if row.concurrency == concurrency and row.drafts != AUTO_DRAFTS]
        line, = left.plot([r.drafts for r in rows], [r.speedup for r in rows], marker="o", label=f"concurrency {concurrency}")
        for row in evaluation.speed:
            if row.concurrency == concurrency and row.drafts == AUTO_DRAFTS:  # auto has no K of its own: a level
                left.axhline(row.speedup, color=line.get_color(), linestyle=":", label=f"auto, concurrency {concurrency}")
    left.set_xticks(sorted({row.drafts for row in evaluation.speed if row.drafts != AUTO_DRAFTS}))
    left.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    left.set(title="Speedup over no MTP", xlabel="drafts per step (K)", ylabel="speedup (x)")
    left.legend()
    drafted = [row for row in evaluation.speed if row.drafts and row.acceptance_per_position]
    for row in drafted:
        positions = range(1, len(row.acceptance_per_position) + 1)
        right.plot(positions, [100 * r for r in row.acceptance_per_position], marker="o",
                   label=f"K={row.drafts}, c={row.concurrency}")
    if drafted:
        right.set_xticks(range(1, max(len(row.acceptance_per_position) for row in drafted) + 1))
    right.set(title="Acceptance by draft position", xlabel="draft position", ylabel="accepted (%)", ylim=(0, 105))
    if drafted:
        right.legend()
    else:
        right.text(0.5, 0.5, "no drafted runs", ha="center", va="center", transform=right.transAxes)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_reports(out_dir: Path, evaluation: Evaluation, info: dict, baseline: BaselineResult | None = None,
                  skipped: str | None = None) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown, data, chart = (out_dir / name for name in REPORT_FILES)
    write_atomic(markdown, render_markdown(evaluation, info, baseline, skipped))
    write_atomic(data, render_json(evaluation, info, baseline, skipped))
    render_chart(evaluation, chart)
    return [markdown, data, chart]
