"""How well a head drafts for the main model, on held-out pages, two ways.

* teacher-forced: the chained pass of training over each page's prompt and the
  main model's own output, K = 7; per draft position the share of bases where
  the head's draft equals the main model's argmax (`match`) and where drafts
  1..j all do (`acceptance`, what a verifier would accept from that base);
* decoding: the speculative decoder (`ocr_app.speculative`) reads each page with K
  drafts per round, exactly as the transformers engine does, and reports
  `SpecDecodingStats`; its greedy output must equal the cached plain reading.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from ocr_app.config import PixelBudget
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.metrics import SpecDecodingStats
from ocr_app.speculative.decoder import SpeculativeDecoder
from ocr_app.speculative.mtp_head import MTPHead
from ocr_app.train_mtp.data import render_page
from ocr_app.train_mtp.distill import Acceptance, distill, make_batch
from ocr_app.train_mtp.loop import Example, autocast
from ocr_app.train_mtp.teacher import Teacher


@dataclass
class HeadEvaluation:
    name: str
    teacher_forced: Acceptance
    decoding: SpecDecodingStats
    pages: int
    identical_pages: int  # decoder output equal to the plain greedy reading

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "pages": self.pages,
            "identical_pages": self.identical_pages,
            "teacher_forced_match": [round(r, 4) for r in self.teacher_forced.match_rates],
            "teacher_forced_acceptance": [round(r, 4) for r in self.teacher_forced.acceptance_rates],
            "decoding": self.decoding.to_dict(),
        }


@torch.no_grad()
def evaluate_head(
    name: str,
    head: MTPHead,
    teacher: Teacher,
    examples: list[Example],
    budget: PixelBudget,
    dpi: int,
    positions: int,
    max_tokens: int,
) -> HeadEvaluation:
    """`head` as the engine runs it: a copy in the main model's dtype, eval mode (the original is untouched)."""
    model = teacher.model
    trained = head
    head = MTPHead(model)
    head.load_state_dict(trained.state_dict())
    head = head.to(device=teacher.device, dtype=model.dtype).eval()
    decoder = SpeculativeDecoder(model, head, teacher.engine.stop_token_ids)
    settings = GenerationSettings(max_tokens=max_tokens, drafts=positions)
    teacher_forced, decoding, identical = Acceptance(), SpecDecodingStats(), 0
    for ref, read in examples:
        image = render_page(ref, budget, dpi)
        batch = make_batch([teacher.page_pass(image, read.token_ids)], None, None, model.dtype)
        with autocast(teacher.device, model.dtype):
            teacher_forced.merge(distill(head, batch, None, steps=positions).acceptance)
        inputs = {key: value.to(teacher.device) for key, value in teacher.engine.page_inputs(image).items()}
        generation = decoder.generate(inputs, settings)
        decoding.merge(generation.stats)
        output = generation.token_ids[:-1] if generation.stopped else generation.token_ids
        identical += tuple(output) == read.token_ids
    return HeadEvaluation(name, teacher_forced, decoding, len(examples), identical)


def _cell(evaluations: list[HeadEvaluation], rates, position: int) -> str:
    """'before -> after' (or one value): the rate at this 0-based position of each evaluation."""
    values = []
    for evaluation in evaluations:
        per_position = rates(evaluation)
        values.append(f"{100 * per_position[position]:.1f}%" if position < len(per_position) else "-")
    return " -> ".join(values)


def render_table(evaluations: list[HeadEvaluation], positions: int) -> Table:
    """One row per draft position: teacher-forced match and acceptance, and the decoder's acceptance."""
    names = " -> ".join(evaluation.name for evaluation in evaluations)
    pages = evaluations[0].pages
    table = Table(title=f"MTP head on {pages} held-out pages ({names})")
    for column in ("draft position", "teacher-forced match", "teacher-forced acceptance", "decoder acceptance"):
        table.add_column(column, justify="right")
    for position in range(positions):
        table.add_row(
            str(position + 1),
            _cell(evaluations, lambda e: e.teacher_forced.match_rates, position),
            _cell(evaluations, lambda e: e.teacher_forced.acceptance_rates, position),
            _cell(evaluations, lambda e: e.decoding.acceptance_rate_per_position, position),
            end_section=position + 1 == positions,
        )
    table.add_row(
        "mean acceptance length", "", "", " -> ".join(f"{e.decoding.mean_acceptance_length:.2f}" for e in evaluations)
    )
    table.add_row(
        "output = plain greedy", "", "", " -> ".join(f"{e.identical_pages}/{e.pages}" for e in evaluations)
    )
    return table


def print_report(evaluations: list[HeadEvaluation], positions: int, json_path: Path | None, console: Console) -> None:
    console.print(render_table(evaluations, positions))
    if json_path is not None:
        json_path.write_text(json.dumps([e.to_dict() for e in evaluations], indent=2) + "\n")
