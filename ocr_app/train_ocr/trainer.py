"""The resumable training loop: synthetic batches in, a checkpoint and a metrics log out.

Everything a run depends on is in `checkpoint.pt` (model, optimizer, scheduler,
step, data position, RNG state, the recipe and the sessions so far), written
atomically; starting the same command again continues where it stopped, and a
run cut into sessions takes the same steps as an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from rapidfuzz.distance import Levenshtein
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from tqdm import tqdm
from transformers import AutoProcessor, Qwen3_5ForConditionalGeneration

from ocr_app.errors import ConfigError
from ocr_app.provenance import code_version
from ocr_app.testing.tiny_model import build_config, character_tokenizer, write_processor
from ocr_app.train_ocr.config import Stage, TrainConfig, parse_train_config
from ocr_app.train_ocr.data import IGNORE_INDEX, BatchStream, Encoder, Example, TrainingBatch, held_out_examples

CHECKPOINT_NAME = "checkpoint.pt"
# Written by the export beside the weights: the run's counters, so a warm start continues the curriculum and data stream.
TRAINING_STATE_NAME = "training_state.json"
# Levels whose images hold one line of text, read left to right: the CTC loss applies to them.
SINGLE_LINE_LEVELS = ("word", "line")
METRICS_NAME = "metrics.jsonl"
# Levels whose text `random_text` replaces (a word level sample becomes one of `text.random_words`).
RANDOM_TEXT_LEVELS = ("word", "line", "block", "page", "band")


@dataclass(frozen=True)
class Budget:
    """When this session stops: at `max_steps` steps in all, or after `max_minutes` of its own wall time."""

    max_steps: int | None = None
    max_minutes: float | None = None


@dataclass
class RunState:
    step: int = 0
    data_position: int = 0
    wall_s: float = 0.0
    sessions: list[dict] = field(default_factory=list)
    last_eval: dict[str, float] = field(default_factory=dict)


def computes_bf16(device: torch.device) -> bool:
    """Whether `device` has bf16 arithmetic of its own (a GPU; a CPU with AVX512-BF16 or AMX).  Elsewhere torch
    emulates it: on an AVX2-only CPU a bf16 matmul took 24x an fp32 one (512x512, torch 2.13, 2026-12-07), and a
    training step 35 s instead of ~2 s, so the recipe's `bf16` autocast applies only where it is native."""
    return device.type != "cpu" or torch.ops.mkldnn._is_mkldnn_bf16_supported()


def new_model(config: TrainConfig) -> tuple[object, Qwen3_5ForConditionalGeneration]:
    """The tokenizer and a freshly initialised model of the recipe (same seed, same weights), in fp32.

    The config's dtype is bf16 (what the export writes), and transformers builds the decoder in it: Adam then
    updated bf16 weights, and an update under half a bf16 step (0.4% of a weight) was rounded away.  Runs up
    to step 49 477 trained so (their checkpoints hold the decoder in bf16): over the fourth cycle (1 300 steps,
    rate 3e-4 falling to 6e-5) 31% of an attention output's weights changed at all, and 6% of the moving
    average's, which is what ships; the vision tower, fp32, changed everywhere.  Weights are fp32 here, and
    `Trainer.autocast` computes in bf16."""
    torch.manual_seed(config.seed)
    tokenizer = character_tokenizer(config.characters)
    return tokenizer, Qwen3_5ForConditionalGeneration(build_config(config.model, tokenizer)).float()


def load_checkpoint(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def checkpoint_config(checkpoint: dict, source: str) -> TrainConfig:
    return parse_train_config(checkpoint["config"], source)


def exported_weights(checkpoint: dict) -> dict[str, torch.Tensor]:
    """The weights a checkpoint is read and shipped with: the moving average when it kept one."""
    if checkpoint.get("ema"):
        return {name.removeprefix("module."): tensor for name, tensor in checkpoint["ema"].items() if name.startswith("module.")}
    return checkpoint["model"]


def answer_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Next-token cross-entropy over the answer tokens: their mean, their sum, or "none" (per position, 0 where
    ignored); logits [B, T, V], labels [B, T]."""
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].float().flatten(0, 1), labels[:, 1:].flatten(), ignore_index=IGNORE_INDEX, reduction=reduction
    )


def word_start_masks(labels: torch.Tensor, space_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Which next-token targets begin the answer's first word, and which begin a later word; labels [B, T],
    both masks [B, T-1] like the targets of `answer_cross_entropy`."""
    targets, previous = labels[:, 1:], labels[:, :-1]
    is_answer = (targets != IGNORE_INDEX) & (targets != space_id)
    return is_answer & (previous == IGNORE_INDEX), is_answer & (previous == space_id)


def character_error_rate(hypotheses: list[str], references: list[str]) -> float:
    """Edit distance summed over samples, divided by the references' total length."""
    errors = sum(Levenshtein.distance(hyp, ref) for hyp, ref in zip(hypotheses, references))
    return errors / max(1, sum(len(ref) for ref in references))


class CtcHead(torch.nn.Module):
    """CTC frames from a grid of visual tokens: each column pools its rows, then spells `slots` frames.

    The pooling is learnt (softmax over a column's rows) rather than a mean:
    a line drawn somewhere on a larger blank sheet fills one row in eight, and
    a mean would drown it in blank rows.
    """

    def __init__(self, hidden_size: int, slots: int, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.row_score = torch.nn.Linear(hidden_size, 1)
        self.spell = torch.nn.Linear(hidden_size, slots * vocab_size)

    def forward(self, grid: torch.Tensor) -> torch.Tensor:
        """grid [H, W, D] -> frame logits [W*slots, V]."""
        row_weights = self.row_score(grid).softmax(0)  # [H, W, 1]
        columns = (row_weights * grid).sum(0)  # [W, D]
        return self.spell(columns).view(-1, self.vocab_size)


class Trainer:
    def __init__(self, config: TrainConfig, output_dir: Path, command: str):
        self.config = config
        self.output_dir = output_dir
        self.command = command
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        torch.set_num_threads(config.threads)
        output_dir.mkdir(parents=True, exist_ok=True)
        tokenizer, self.model = new_model(config)
        write_processor(output_dir / "processor", tokenizer, config.model.min_pixels, config.model.max_pixels)
        self.encoder = Encoder(AutoProcessor.from_pretrained(output_dir / "processor"), config.prompt)
        self.model.to(self.device).train()
        # Copied before the CTC hook is attached, so the average carries no hook back to this trainer.
        self.ema = self._new_ema() if config.optimizer.ema_decay > 0 else None
        self.ctc_head = self._attach_ctc_head() if config.ctc.weight > 0 else None
        parameters = list(self.model.parameters()) + (list(self.ctc_head.parameters()) if self.ctc_head else [])
        opt = config.optimizer
        self.optimizer = torch.optim.AdamW(parameters, lr=opt.lr, betas=opt.betas, weight_decay=opt.weight_decay)
        warmup = max(1, opt.warmup_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: min(1.0, (step + 1) / warmup))
        self.state = RunState()
        self.held_out: dict[str, list[Example]] = {}
        self.held_out_random: dict[str, list[Example]] = {}
        self.stop_requested = False
        self.step_lr = 0.0

    def _new_ema(self) -> AveragedModel:
        ema = AveragedModel(self.model, multi_avg_fn=get_ema_multi_avg_fn(self.config.optimizer.ema_decay), use_buffers=True)
        return ema.eval()

    @property
    def reader(self) -> Qwen3_5ForConditionalGeneration:
        """The weights evaluated and exported: the moving average when there is one."""
        return self.ema.module if self.ema is not None else self.model

    def _restart_ema(self) -> None:
        """After loading weights from elsewhere, the average starts from them."""
        if self.ema is not None:
            self.ema.module.load_state_dict(self.model.state_dict())

    def _attach_ctc_head(self) -> CtcHead:
        """A reader of visual-token columns, fed by a hook on the vision merger's output."""
        text_config = self.model.config.text_config
        head = CtcHead(text_config.hidden_size, self.config.ctc.slots_per_column, text_config.vocab_size)
        self.model.model.visual.merger.register_forward_hook(self._keep_visual_tokens)
        self.visual_tokens: torch.Tensor | None = None
        return head.to(self.device)

    def _keep_visual_tokens(self, module, inputs, output: torch.Tensor) -> None:
        self.visual_tokens = output  # [sum over images of h*w/4, hidden], row-major per image

    def ctc_loss(self, grids: torch.Tensor, texts: tuple[str, ...], levels: tuple[str, ...]) -> torch.Tensor:
        """CTC of each one-line image's text against its visual columns, per target token, summed over images."""
        # Patches are merged 2x2: an image of h x w patches has h/2 x w/2 visual tokens.
        per_image = torch.split(self.visual_tokens, (grids.prod(-1) // 4).tolist())
        frames, targets = [], []
        for tokens, (_, height, width), text, level in zip(per_image, grids.tolist(), texts, levels):
            if level not in SINGLE_LINE_LEVELS:
                continue
            frames.append(self.ctc_head(tokens.view(height // 2, width // 2, -1).float()))  # [W*slots, V]
            targets.append(torch.tensor(self.encoder.tokenizer(text, add_special_tokens=False).input_ids))
        if not frames:
            return torch.zeros((), device=self.device)
        log_probs = torch.nn.utils.rnn.pad_sequence(frames).log_softmax(-1)  # [T, B', V]
        target_lengths = torch.tensor([len(t) for t in targets])
        per_line = torch.nn.functional.ctc_loss(
            log_probs,
            torch.cat(targets).to(self.device),
            torch.tensor([len(f) for f in frames]),
            target_lengths,
            blank=self.encoder.pad_id,
            reduction="none",
            zero_infinity=True,
        )  # [B']
        return (per_line / target_lengths.clamp(min=1).to(per_line)).sum()

    @property
    def checkpoint_path(self) -> Path:
        return self.output_dir / CHECKPOINT_NAME

    def resume(self, checkpoint: dict | None = None) -> bool:
        """Load the checkpoint in the output folder if there is one (or `checkpoint`, that folder's checkpoint
        already loaded by the caller); False for a fresh run."""
        if checkpoint is None:
            if not self.checkpoint_path.exists():
                return False
            checkpoint = load_checkpoint(self.checkpoint_path)
        saved = checkpoint_config(checkpoint, str(self.checkpoint_path))
        if saved.architecture() != self.config.architecture():
            raise ConfigError(
                f"{self.checkpoint_path} was trained with another model, tokenizer or prompt; "
                "resume with its own recipe (no --config) or use a new --output"
            )
        self.model.load_state_dict(checkpoint["model"])
        # An average kept with another decay is not this recipe's average: it starts anew from the weights.
        if self.ema is not None and checkpoint.get("ema") and saved.optimizer.ema_decay == self.config.optimizer.ema_decay:
            self.ema.load_state_dict(checkpoint["ema"])
        else:
            self._restart_ema()
        if self.ctc_head is not None:
            self.ctc_head.load_state_dict(checkpoint["ctc_head"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        self.scheduler.load_state_dict(checkpoint["scheduler"])
        torch.set_rng_state(checkpoint["torch_rng"])
        self.state = RunState(**checkpoint["state"])
        return True

    def warm_start(self, model_dir: Path) -> None:
        """Start from an exported model folder: its weights and counters, with a fresh optimizer and CTC head.

        This is how a run continues across machines that keep no checkpoint:
        the shipped model folder carries the weights (bf16) and the step, data
        position and sessions so far; Adam's moments re-warm with the warmup.
        """
        state_path = model_dir / TRAINING_STATE_NAME
        if not state_path.exists():
            raise ConfigError(f"{model_dir}: no {TRAINING_STATE_NAME}; not a folder written by `ocr-train-ocr export`")
        trained = Qwen3_5ForConditionalGeneration.from_pretrained(model_dir, torch_dtype=torch.float32)
        try:
            self.model.load_state_dict(trained.state_dict())
        except RuntimeError:
            raise ConfigError(f"{model_dir}: its model differs from the recipe's; warm-start with the recipe it was trained with") from None
        self._restart_ema()
        self.state = RunState(**json.loads(state_path.read_text(encoding="utf-8")))

    def save_checkpoint(self) -> None:
        checkpoint = {
            "config": self.config.model_dump(mode="json"),
            "model": self.model.state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else {},
            "ctc_head": self.ctc_head.state_dict() if self.ctc_head is not None else {},
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "state": self.state.__dict__,
        }
        partial = self.checkpoint_path.with_suffix(".tmp")
        torch.save(checkpoint, partial)
        os.replace(partial, self.checkpoint_path)

    def log(self, record: dict) -> None:
        with open(self.output_dir / METRICS_NAME, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def on_device(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {name: tensor.to(self.device) for name, tensor in inputs.items()}

    def autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.config.bf16 and computes_bf16(self.device))

    def train_step(self, training_batch: TrainingBatch, lr_scale: float = 1.0) -> tuple[float, float]:
        """One optimizer step at the warmup's learning rate times `lr_scale` (the stage's); (answer
        cross-entropy, CTC loss or 0) as in `accumulate_gradients`."""
        self.step_lr = self.scheduler.get_last_lr()[0] * lr_scale
        for group in self.optimizer.param_groups:
            group["lr"] = self.step_lr
        losses = self.accumulate_gradients(training_batch)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.optimizer.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema is not None:
            self.ema.update_parameters(self.model)
        return losses

    def accumulate_gradients(self, training_batch: TrainingBatch) -> tuple[float, float]:
        """Backward over the batch's micro-batches; (answer cross-entropy, CTC loss or 0), both the batch's
        means: per answer token, and per one-line image of its target's length."""
        micro_batches = training_batch.micro_batches
        answer_tokens = sum(int((micro.inputs["labels"][:, 1:] != IGNORE_INDEX).sum()) for micro in micro_batches)
        line_images = sum(level in SINGLE_LINE_LEVELS for micro in micro_batches for level in micro.levels)
        loss_total = ctc_total = 0.0
        for micro in micro_batches:
            batch = self.on_device(micro.inputs)
            labels = batch.pop("labels")  # [b, T]
            with self.autocast():
                logits = self.model(**batch).logits  # [b, T, V]
            loss = answer_cross_entropy(logits, labels, reduction="sum") / answer_tokens
            ctc = (
                self.ctc_loss(batch["image_grid_thw"], micro.texts, micro.levels) / max(1, line_images)
                if self.ctc_head is not None
                else torch.zeros(())
            )
            (loss + self.config.ctc.weight * ctc).backward()
            loss_total += loss.item()
            ctc_total += ctc.item()
        return loss_total, ctc_total

    def image_reliance(self, examples: list[Example]) -> tuple[float, float]:
        """Teacher-forced answer loss (nats/token) of the evaluated weights with each example's own image,
        and with the next example's image: a reader's gap is large; a model reciting likely text has none."""
        others = [Example(examples[(i + 1) % len(examples)].image, example.text, example.level) for i, example in enumerate(examples)]
        losses = []
        for pairing in (examples, others):
            batch = self.on_device(self.encoder.batch(pairing))
            labels = batch.pop("labels")  # [B, T]
            with torch.inference_mode(), self.autocast():
                losses.append(answer_cross_entropy(self.reader(**batch).logits, labels).item())
        return losses[0], losses[1]

    def word_start_losses(self, examples: list[Example]) -> tuple[float, float]:
        """Mean answer loss (nats) at the first letter of the first word and of the later words, own image.

        Words drawn independently are unpredictable from their letters before:
        a reader pays as little at a later word's start as at the first one,
        a model that reads the line's start and then recites pays far more.
        """
        batch = self.on_device(self.encoder.batch(examples))
        labels = batch.pop("labels")  # [B, T]
        with torch.inference_mode(), self.autocast():
            logits = self.reader(**batch).logits  # [B, T, V]
        losses = answer_cross_entropy(logits, labels, reduction="none").view(labels[:, 1:].shape)  # [B, T-1]
        first, later = word_start_masks(labels, self.encoder.tokenizer.convert_tokens_to_ids("Ġ"))
        return losses[first].mean().item(), losses[later].mean().item()

    def read(self, image, max_new_tokens: int) -> str:
        """Greedy text for one image, as the hf engine would produce it."""
        inputs = self.on_device(self.encoder.prompt_inputs(image))
        prompt_tokens = inputs["input_ids"].shape[1]
        with torch.inference_mode(), self.autocast():
            output = self.reader.generate(
                **inputs,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=self.encoder.end_id,
                pad_token_id=self.encoder.pad_id,
            )
        return self.encoder.tokenizer.decode(output[0, prompt_tokens:], skip_special_tokens=True)

    def _reading_length(self, text: str) -> int:
        """Room for twice the reference's tokens: a longer reading is all errors, and costs minutes on a CPU."""
        reference_tokens = len(self.encoder.tokenizer(text, add_special_tokens=False).input_ids)
        return min(self.config.evaluation.max_new_tokens, 2 * reference_tokens + 8)

    def evaluate(self, levels: list[str] | None = None) -> dict[str, float | str]:
        """Greedy CER on the held-out samples of `levels` (default: those the current stage trains on), and on
        held-out random words (half of them invented: only a reader of letters reads them), with their answer
        loss with the own image and its gap to another image's."""
        stage = self.config.stage_at(self.state.step)
        levels = levels or [level for level, weight in stage.levels.items() if weight > 0]
        self.model.eval()
        results = {}
        for level in levels:
            if level not in self.held_out:
                self.held_out[level] = held_out_examples(
                    level, self.config.evaluation.samples_per_level, regions=self.config.regions, budget=self.config.budget()
                )
            examples = self.held_out[level]
            results.update(self._greedy_cer(examples, level))
            if level in RANDOM_TEXT_LEVELS:
                # Stock text can be recited; on words drawn independently only reading lowers the loss.
                if level not in self.held_out_random:
                    self.held_out_random[level] = held_out_examples(
                        level, self.config.evaluation.samples_per_level, True, self.config.regions
                    )
                results.update(self._greedy_cer(self.held_out_random[level], f"random_{level}"))
                own, other = self.image_reliance(self.held_out_random[level])
                results[f"random_loss_{level}"], results[f"random_gap_{level}"] = own, other - own
        self.model.train()
        return results

    def _greedy_cer(self, examples: list[Example], name: str) -> dict[str, float | str]:
        hypotheses = [self.read(example.image, self._reading_length(example.text)) for example in examples]
        return {
            f"cer_{name}": character_error_rate(hypotheses, [example.text for example in examples]),
            f"example_{name}": f"{examples[0].text[:60]!r} -> {hypotheses[0][:60]!r}",
        }

    def run(self, budget: Budget) -> RunState:
        config = self.config
        started = time.monotonic()
        session = {"command": self.command, "commit": code_version(), "start_step": self.state.step, "wall_s": 0.0}
        self.state.sessions.append(session)
        wall_before = self.state.wall_s
        last_checkpoint = started
        previous_handlers = {sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        recent_losses: list[tuple[float, float]] = []
        progress = tqdm(total=budget.max_steps, initial=self.state.step, unit="step", mininterval=30, dynamic_ncols=True)
        stream = BatchStream(
            self.encoder, self.output_dir / "processor", config.prompt, config.data_workers, config.micro_batch_tokens,
            config.regions, config.budget(),
        )
        batches = stream.batches(self._plan())
        try:
            while not self._budget_spent(budget, started):
                stage = config.stage_at(self.state.step)
                loss, ctc = self.train_step(next(batches), stage.lr_scale)
                self.state.step += 1
                self.state.data_position += stage.batch_size
                self.state.wall_s = wall_before + time.monotonic() - started
                session["wall_s"] = time.monotonic() - started
                recent_losses.append((loss, ctc))
                progress.update(1)
                progress.set_postfix(loss=f"{loss:.3f}", refresh=False, **{k: f"{v:.3f}" for k, v in self.state.last_eval.items()})
                if self.state.step % config.log_every_steps == 0:
                    self._log_train(recent_losses, stage, started, session)
                    recent_losses = []
                if self.state.step % config.evaluation.every_steps == 0:
                    self._log_eval()
                due_by_time = time.monotonic() - last_checkpoint > 60 * config.checkpoint_every_minutes
                if self.state.step % config.checkpoint_every_steps == 0 or due_by_time:
                    self.save_checkpoint()
                    last_checkpoint = time.monotonic()
            self.save_checkpoint()
        finally:
            stream.close()
            progress.close()
            for sig, handler in previous_handlers.items():
                signal.signal(sig, handler)
        return self.state

    def _plan(self) -> Iterator[tuple[int, Stage]]:
        """(data position, stage) of this step and every later one."""
        step, position = self.state.step, self.state.data_position
        while True:
            stage = self.config.stage_at(step)
            yield position, stage
            step, position = step + 1, position + stage.batch_size

    def _log_train(self, losses: list[tuple[float, float]], stage, started: float, session: dict) -> None:
        steps_done = self.state.step - session["start_step"]
        elapsed = time.monotonic() - started
        record = {
            "step": self.state.step,
            "samples": self.state.data_position,
            "loss": sum(loss for loss, _ in losses) / len(losses),
            "ctc": sum(ctc for _, ctc in losses) / len(losses),
            "lr": self.step_lr,  # the last step's
            "levels": ",".join(level for level, weight in stage.levels.items() if weight > 0),
            "steps_per_s": steps_done / elapsed,
            "wall_s": round(self.state.wall_s, 1),
        }
        self.log(record)
        tqdm.write(
            f"step {record['step']} samples {record['samples']} loss {record['loss']:.4f} ctc {record['ctc']:.3f} lr {record['lr']:.2e} "
            f"[{record['levels']}] {record['steps_per_s']:.3f} steps/s",
        )

    def _log_eval(self) -> None:
        results = self.evaluate()
        self.state.last_eval = {k: v for k, v in results.items() if k.startswith("cer")}
        self.log({"step": self.state.step, **results})
        tqdm.write(f"eval step {self.state.step}: " + " ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in results.items()))

    def _budget_spent(self, budget: Budget, started: float) -> bool:
        if self.stop_requested:
            return True
        if budget.max_steps is not None and self.state.step >= budget.max_steps:
            return True
        return budget.max_minutes is not None and time.monotonic() - started >= 60 * budget.max_minutes

    def _request_stop(self, signum, frame) -> None:
        self.stop_requested = True


def train(
    config: TrainConfig, output_dir: Path, budget: Budget, command: str = "", warm_start: Path | None = None
) -> RunState:
    """Train until the budget is spent, resuming from `output_dir`'s checkpoint when there is one,
    else from the exported model folder `warm_start` when given, else from scratch."""
    trainer = Trainer(config, output_dir, command)
    if not trainer.resume() and warm_start is not None:
        trainer.warm_start(warm_start)
    return trainer.run(budget)
