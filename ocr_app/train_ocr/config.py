"""The training recipe as a small typed object, loaded from `configs/train_ocr.toml`."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ocr_app.config import PixelBudget, RegionSplit
from ocr_app.errors import ConfigError
from ocr_app.synth import LEVELS, Placement
from ocr_app.testing.tiny_model import TinySizes


# Parts of pages of real born-digital PDFs, their answers from the text layer (`textlayer`, `corpus`), and of
# pages made as real ones are, HTML laid out by PyMuPDF's Story (`ocr_app.synth.story`), answered the same way.
REAL, LAYOUT = "real", "layout"
TRAIN_LEVELS = (*LEVELS, REAL, LAYOUT)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Stage(_Strict):
    """One step of the curriculum: which levels of `ocr_app.synth` to draw, how often, for how many steps."""

    steps: int
    levels: dict[str, float]
    batch_size: int
    # Share of samples whose text is words drawn independently (see `ocr_app.synth.make_sample`).
    random_text: float = Field(default=0.0, ge=0.0, le=1.0)
    # Share of answer tokens replaced, in the model's input only, by other answer tokens of the micro-batch
    # (see `data.noisy_history`): with a history it cannot trust, the image is the cue to the next token.
    history_noise: float = Field(default=0.0, ge=0.0, lt=1.0)
    # Margins of words and lines: on a larger sheet, or cut from a page as a band (`ocr_app.synth._margins`).
    placement: Placement = "sheet"
    # Share of words and lines starting with bold words, as labels and headings are (`ocr_app.synth._bold_words`).
    bold: float = Field(default=0.0, ge=0.0, le=1.0)
    # Share of synthetic samples set in the type of real documents, where installed (`make train-setup`;
    # `ocr_app.synth.render.DOCUMENT_FAMILIES`), and share of random words that are dictionary words and
    # identifiers in their real formats (`ocr_app.synth.text.real_token`).
    fonts: float = Field(default=0.0, ge=0.0, le=1.0)
    lexicon: float = Field(default=0.0, ge=0.0, le=1.0)
    # The optimizer's learning rate is multiplied by this during the stage (a lower rate settles the weights).
    lr_scale: float = Field(default=1.0, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _known_levels(self) -> Stage:
        unknown = set(self.levels) - set(TRAIN_LEVELS)
        if unknown:
            raise ValueError(f"unknown level(s) {sorted(unknown)} (levels: {', '.join(TRAIN_LEVELS)})")
        if self.steps <= 0 or self.batch_size <= 0 or not any(weight > 0 for weight in self.levels.values()):
            raise ValueError("a stage needs steps > 0, batch_size > 0 and a level with weight > 0")
        return self


class Optimizer(_Strict):
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    warmup_steps: int = 200
    # > 0: evaluation and export use an exponential moving average of the weights with this decay,
    # which smooths the step-to-step swings of a constant learning rate.
    ema_decay: float = Field(default=0.0, ge=0.0, lt=1.0)
    grad_clip: float = 1.0


class Evaluation(_Strict):
    every_steps: int = 250
    samples_per_level: int = 8
    max_new_tokens: int = 256


class Ctc(_Strict):
    """An auxiliary CTC loss on the visual tokens of one-line images (training only, not exported).

    Each column of visual tokens (32 px wide) predicts `slots_per_column` CTC
    frames, so the vision tower must see which letters are where; this is meant
    to shorten the plateau in which the decoder ignores the image.
    """

    weight: float = 0.0
    slots_per_column: int = 4


class TrainConfig(_Strict):
    seed: int = 0
    threads: int = 2
    # bf16 autocast: ~1.5x faster than fp32 on a CPU with native bf16 (AVX512-BF16, AMX), and the usual choice on
    # a GPU; ignored where bf16 is emulated (`trainer.computes_bf16`).
    bf16: bool = True
    # Processes rendering batches ahead of the trainer (0: in the training process); they change no result.
    data_workers: int = 0
    # Most tokens (padded) in one forward pass; a step's batch is cut into micro-batches of like lengths
    # whose gradients add up to the batch's (0: the whole batch at once).  Speed only, not the math.
    micro_batch_tokens: int = Field(default=0, ge=0)
    prompt: str
    # Characters that get one token each; anything else is spelled in bytes.
    characters: str
    # Sizes of the Qwen3.5 model; its min/max_pixels are the pixel budget of every image, as in the preset.
    model: TinySizes
    optimizer: Optimizer = Optimizer()
    evaluation: Evaluation = Evaluation()
    ctc: Ctc = Ctc()
    stages: tuple[Stage, ...]
    # How the exported model reads a page (its folder preset's `[regions]`): as bands no taller than the
    # blocks it was trained on; None reads whole pages.  Inference only: it changes no weight.
    regions: RegionSplit | None = None
    log_every_steps: int = 10
    checkpoint_every_steps: int = 200
    checkpoint_every_minutes: float = 10.0

    @model_validator(mode="after")
    def _bands_need_regions(self) -> TrainConfig:
        if self.regions is None and any(stage.levels.get(level, 0) > 0 for stage in self.stages for level in ("band", REAL, LAYOUT)):
            raise ValueError("the band, real and layout levels cut pages as [regions] does: a recipe with them needs [regions]")
        return self

    def stage_at(self, step: int) -> Stage:
        """The stage that step `step` (0-based) belongs to; the last stage runs on forever."""
        end = 0
        for stage in self.stages:
            end += stage.steps
            if step < end:
                return stage
        return self.stages[-1]

    def budget(self) -> PixelBudget:
        """The pixels of a page as the exported model's preset fits it."""
        return PixelBudget(min_pixels=self.model.min_pixels, max_pixels=self.model.max_pixels)

    def architecture(self) -> dict:
        """What a checkpoint's weights depend on: a resumed run must not change it."""
        return {"characters": self.characters, "model": self.model, "prompt": self.prompt, "ctc": self.ctc}


def load_train_config(path: Path) -> TrainConfig:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return parse_train_config(raw, str(path))


def parse_train_config(raw: dict, source: str) -> TrainConfig:
    try:
        return TrainConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"{source}: {where}: {first['msg']}") from None
