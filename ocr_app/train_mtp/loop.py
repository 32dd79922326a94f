"""The training loop: AdamW on the head's own parameters, warmup then cosine decay, gradient clipping
and accumulation, and a checkpoint that a killed run resumes from.

Reproducible by construction: the page order of every epoch and the window of
bases of every page are drawn from generators seeded by (seed, epoch) and
(seed, step, micro-batch), and nothing else in a step is random, so a resumed
run takes the same steps as one that was never stopped.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from PIL import Image

from ocr_app.config import PixelBudget
from ocr_app.errors import ConfigError
from ocr_app.pages import prefetch
from ocr_app.speculative.mtp_head import MTPHead
from ocr_app.train_mtp.config import TrainConfig
from ocr_app.train_mtp.data import PageRead, PageRef, render_page
from ocr_app.train_mtp.distill import Acceptance, distill, make_batch
from ocr_app.train_mtp.teacher import Teacher

CHECKPOINT_FILE = "checkpoint.pt"
LOG_FILE = "train_log.jsonl"
# Settings that may differ between a run and its resumption: they do not change the steps taken.
RESUMABLE_CHANGES = {"checkpoint_every", "eval_fraction", "eval_positions", "eval_pages"}

Example = tuple[PageRef, PageRead]


@dataclass
class StepReport:
    step: int
    total_steps: int
    learning_rate: float
    loss: float
    step_losses: list[float]
    acceptance: Acceptance


def autocast(device: torch.device, main_dtype: torch.dtype):
    """bf16 autocast when the main model runs in bf16 (GPU checkpoints); plain fp32 otherwise."""
    if main_dtype == torch.bfloat16:
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def total_steps(config: TrainConfig, train_pages: int) -> int:
    pages_per_step = config.batch_size * config.grad_accum
    planned = math.ceil(config.epochs * train_pages / pages_per_step)
    return min(planned, config.max_steps) if config.max_steps is not None else planned


def pages_reached(config: TrainConfig, train_pages: int) -> int:
    """How many of `train_pages` the run's steps reach: all, unless `max_steps` ends it within its epochs."""
    if config.max_steps is None:
        return train_pages
    return min(train_pages, math.ceil(config.max_steps * config.batch_size * config.grad_accum / config.epochs))


def lr_factor(step: int, warmup: int, total: int, min_ratio: float) -> float:
    """Linear warmup to 1, then cosine down to `min_ratio` at the last step."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


class Trainer:
    def __init__(
        self,
        config: TrainConfig,
        teacher: Teacher,
        head: MTPHead,
        examples: list[Example],
        budget: PixelBudget,
        dpi: int,
        work_dir: Path,
    ):
        if not examples:
            raise ConfigError("no training pages with output: nothing to train on")
        self.config = config
        self.teacher = teacher
        self.head = head
        self.examples = examples
        self.budget = budget
        self.dpi = dpi
        self.work_dir = work_dir
        self.total_steps = total_steps(config, len(examples))
        self.warmup = min(config.warmup_steps, self.total_steps // 10)  # a smoke run is not all warmup
        self.step = 0
        self.optimizer = torch.optim.AdamW(
            [p for p in head.parameters() if p.requires_grad], lr=config.learning_rate, weight_decay=config.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(step, self.warmup, self.total_steps, config.min_lr_ratio)
        )
        self._orders: dict[int, list[int]] = {}

    def _example(self, index: int) -> Example:
        """The index-th page of the endless stream of epochs, each in its own seeded order."""
        epoch, offset = divmod(index, len(self.examples))
        if epoch not in self._orders:
            order = list(range(len(self.examples)))
            random.Random(f"{self.config.seed}-epoch-{epoch}").shuffle(order)
            self._orders = {epoch: order}
        return self.examples[self._orders[epoch][offset]]

    def _rendered(self, step: int) -> Iterator[list[tuple[Image.Image, PageRead]]]:
        """The pages of every micro-batch from `step` on, rendered as inference renders them; endless."""
        per_micro = self.config.batch_size
        while True:
            for micro in range(self.config.grad_accum):
                first = (step * self.config.grad_accum + micro) * per_micro
                examples = [self._example(first + i) for i in range(per_micro)]
                yield [(render_page(ref, self.budget, self.dpi), read) for ref, read in examples]
            step += 1

    def train_step(self, rendered: Iterator[list[tuple[Image.Image, PageRead]]] | None = None) -> StepReport:
        """One optimizer step; `rendered` is `_rendered(self.step)`, possibly produced ahead on a thread."""
        config = self.config
        rendered = rendered if rendered is not None else self._rendered(self.step)
        device, main_dtype = self.teacher.device, self.teacher.model.dtype
        self.head.train()
        self.optimizer.zero_grad(set_to_none=True)
        acceptance = Acceptance()
        loss_sum, step_losses = 0.0, [0.0] * config.draft_steps
        for micro in range(config.grad_accum):
            passes = [self.teacher.page_pass(image, read.token_ids) for image, read in next(rendered)]
            rng = random.Random(f"{config.seed}-step-{self.step}-micro-{micro}")
            batch = make_batch(passes, config.max_bases, rng, torch.float32)
            with autocast(device, main_dtype):
                outcome = distill(self.head, batch, config.weights(), config.temperature, config.ce_weight)
            (outcome.loss / config.grad_accum).backward()
            loss_sum += float(outcome.loss.detach()) / config.grad_accum
            for j, value in enumerate(outcome.step_losses):
                step_losses[j] += value / config.grad_accum
            acceptance.merge(outcome.acceptance)
        torch.nn.utils.clip_grad_norm_(self.head.parameters(), config.max_grad_norm)
        learning_rate = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        report = StepReport(self.step, self.total_steps, learning_rate, loss_sum, step_losses, acceptance)
        with (self.work_dir / LOG_FILE).open("a") as log:
            log.write(json.dumps({
                "step": report.step, "lr": learning_rate, "loss": round(loss_sum, 6),
                "step_losses": [round(v, 6) for v in step_losses],
                "acceptance": [round(r, 4) for r in acceptance.acceptance_rates],
            }) + "\n")
        return report

    def run(self, on_step: Callable[[StepReport], None] = lambda report: None) -> None:
        rendered = prefetch(self._rendered(self.step), depth=2 * self.config.grad_accum)
        try:
            while self.step < self.total_steps:
                report = self.train_step(rendered)
                on_step(report)
                if self.step % self.config.checkpoint_every == 0 or self.step == self.total_steps:
                    self.save_checkpoint()
        finally:
            rendered.close()

    def save_checkpoint(self) -> Path:
        path = self.work_dir / CHECKPOINT_FILE
        partial = path.with_suffix(".partial")
        torch.save(
            {
                "step": self.step,
                "total_steps": self.total_steps,
                "config": self.config.model_dump(),
                "train_pages": [ref.page_id for ref, _ in self.examples],
                "head": self.head.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
            },
            partial,
        )
        partial.replace(path)  # a kill while saving leaves the previous checkpoint intact
        return path

    def resume(self) -> bool:
        """Continue from the work folder's checkpoint; False when there is none."""
        path = self.work_dir / CHECKPOINT_FILE
        if not path.exists():
            return False
        state = torch.load(path, map_location=self.teacher.device, weights_only=True)
        saved, current = state["config"], self.config.model_dump()
        changed = sorted(key for key in current if key not in RESUMABLE_CHANGES and saved.get(key) != current[key])
        if changed:
            raise ConfigError(f"cannot resume {path}: settings changed since it was saved ({', '.join(changed)})")
        if state["train_pages"] != [ref.page_id for ref, _ in self.examples]:
            raise ConfigError(f"cannot resume {path}: the training pages differ from the saved run's")
        self.head.load_state_dict(state["head"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = state["step"]
        # The log must hold each step once, as an uninterrupted run would have written it.
        log = self.work_dir / LOG_FILE
        if log.exists():
            kept = [line for line in log.read_text().splitlines() if _logged_step(line) <= self.step]
            log.write_text("".join(line + "\n" for line in kept))
        return True


def _logged_step(line: str) -> float:
    try:
        return json.loads(line)["step"]
    except (json.JSONDecodeError, KeyError):  # the half-written last line of a killed run
        return math.inf
