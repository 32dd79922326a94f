"""`ocr-eval real` reports: `report.md` (model and baseline side by side, by rendering and category, then the
drafting checks, speed and acceptance), `report.json` (every figure, every page's readings), `report.png`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ocr_app.evaluation import Evaluation
from ocr_app.outputs import write_atomic
from ocr_app.realbench import ALL, GroupScore, RealPage, TextLayerScore, group_scores, score_text_layer
from ocr_app.reports import REPORT_FILES, render_chart, setup_name, speed_tables


@dataclass(frozen=True)
class Reader:
    """One reader's readings of the pages and their scores: the model at some K, or the baseline."""

    name: str
    texts: dict[str, str]  # by page id
    scores: dict[str, TextLayerScore]
    groups: list[GroupScore]


def score_reader(name: str, pages: list[RealPage], texts: dict[str, str]) -> Reader:
    scores = {page.id: score_text_layer(texts[page.id], page.reference) for page in pages}
    return Reader(name, texts, scores, group_scores(pages, scores))


def readers_of(evaluation: Evaluation, pages: list[RealPage]) -> list[Reader]:
    """The model's readers: one per K at the first concurrency."""
    first = evaluation.runs[0].concurrency
    return [score_reader(f"model, {setup_name(run.drafts)}", pages,
                         {page_id: output.text for page_id, output in run.outputs.items()})
            for run in evaluation.runs if run.concurrency == first]


def score_table(readers: list[Reader]) -> list[str]:
    header = ["Rendering", "Category", "Pages"]
    header += [f"{reader.name} {measure}" for measure in ("word F1", "line CER", "CER") for reader in readers]
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (len(header) - 2)]
    for index, group in enumerate(readers[0].groups):
        cells = [f"{reader.groups[index].score.word_f1:.3f}" for reader in readers]
        cells += [f"{reader.groups[index].score.line_cer:.3f}" for reader in readers]
        cells += [f"{reader.groups[index].score.cer:.3f}" for reader in readers]
        if group.category == ALL:
            cells = [f"**{cell}**" for cell in cells]
        lines.append(f"| {group.rendering} | {'**all**' if group.category == ALL else group.category} | "
                     f"{group.pages} | " + " | ".join(cells) + " |")
    return lines


def render_markdown(evaluation: Evaluation, readers: list[Reader], info: dict, skipped: str | None) -> str:
    lines = [
        "# Real-document evaluation",
        "",
        f"Model `{info['model']}` on engine `{info['engine']}`, {info['pages']} pages of `{info['data']}` "
        f"({', '.join(info['renderings'])}); engine start {info['engine_start_s']:.1f} s; max {info['max_tokens']} "
        "tokens per page. Truth: each page's own PDF text layer.",
        "",
        "Word F1: multisets of NFKC words (order does not count). Line CER: each truth line against its best-matching "
        "reading line. CER: the whole page in reading order. Page means; see `docs/benchmark-real.md`.",
        "",
        *score_table(readers),
        "",
    ]
    if skipped:
        lines += [f"Baseline skipped: {skipped}.", ""]
    if "baseline_wall_s" in info:
        lines += [f"The baseline read the pages at their original resolution in {info['baseline_wall_s']:.1f} s.", ""]
    lines += ["## Drafting leaves the output unchanged", "",
              "| Setup | Concurrency | CER | Identical pages | Check |", "|---|---:|---:|---:|---|"]
    checks = {(c.drafts, c.concurrency): c for c in evaluation.checks}
    for run in evaluation.runs:
        check = checks.get((run.drafts, run.concurrency))
        identical = f"{check.identical_pages}/{check.pages}" if check else ""
        verdict = ("pass" if check.passed else f"FAIL (tolerance {check.tolerance})") if check else "reference"
        lines.append(f"| {setup_name(run.drafts)} | {run.concurrency} | {run.summary.page_mean.cer:.4f} | "
                     f"{identical} | {verdict} |")
    lines += ["", *speed_tables(evaluation.speed)]
    lines += evaluation.auto.markdown() if evaluation.auto is not None else []
    return "\n".join(lines) + "\n"


def render_json(evaluation: Evaluation, pages: list[RealPage], readers: list[Reader], info: dict,
                skipped: str | None) -> str:
    document = {
        "info": info,
        "baseline_skipped": skipped,
        "readers": [{"name": reader.name, "groups": [
            {"rendering": g.rendering, "category": g.category, "pages": g.pages, **g.score.to_dict()}
            for g in reader.groups]} for reader in readers],
        "speed": [{**row.__dict__, "setup": setup_name(row.drafts),
                   "acceptance_per_position": list(row.acceptance_per_position)} for row in evaluation.speed],
        "drafts_auto": evaluation.auto.to_dict() if evaluation.auto is not None else None,
        "unchanged_checks": [{"drafts": c.drafts, "concurrency": c.concurrency, "passed": c.passed,
                              "identical_pages": c.identical_pages, "pages": c.pages, "retried_pages": c.retried_pages,
                              "near_tie_pages": sum(d.near_tie for d in c.differences)} for c in evaluation.checks],
        "pages": [{"id": page.id, "rendering": page.rendering, "category": page.category, "source": page.source,
                   "reference": page.reference,
                   "readings": {reader.name: {"text": reader.texts[page.id], **reader.scores[page.id].to_dict()}
                                for reader in readers}} for page in pages],
    }
    return json.dumps(document, ensure_ascii=False, indent=1) + "\n"


def write_real_reports(out_dir: Path, evaluation: Evaluation, pages: list[RealPage], readers: list[Reader],
                       info: dict, skipped: str | None) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown, data, chart = (out_dir / name for name in REPORT_FILES)
    write_atomic(markdown, render_markdown(evaluation, readers, info, skipped))
    write_atomic(data, render_json(evaluation, pages, readers, info, skipped))
    render_chart(evaluation, chart)
    return [markdown, data, chart]
