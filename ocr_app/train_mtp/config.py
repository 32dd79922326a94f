"""The training configuration: `configs/train_mtp.toml`, then command-line overrides, validated once."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ocr_app.config import _load_toml, configs_dir
from ocr_app.errors import ConfigError

MAX_DRAFT_STEPS = 7


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    draft_steps: int = 3
    step_weights: Literal["equal", "decay"] | list[float] = "decay"
    temperature: float = 1.0
    ce_weight: float = 0.1
    learning_rate: float = 3e-4
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    warmup_steps: int = 50
    max_grad_norm: float = 1.0
    batch_size: int = 4
    grad_accum: int = 4
    epochs: int = 2
    max_steps: int | None = None
    max_bases: int = 512
    eval_fraction: float = 0.05
    eval_positions: int = 7
    eval_pages: int = 32
    checkpoint_every: int = 200
    seed: int = 0

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if not 1 <= self.draft_steps <= MAX_DRAFT_STEPS:
            raise ValueError(f"draft_steps must be between 1 and {MAX_DRAFT_STEPS}")
        if not 1 <= self.eval_positions <= MAX_DRAFT_STEPS:
            raise ValueError(f"eval_positions must be between 1 and {MAX_DRAFT_STEPS}")
        if isinstance(self.step_weights, list) and (
            len(self.step_weights) != self.draft_steps or min(self.step_weights) < 0 or sum(self.step_weights) <= 0
        ):
            raise ValueError("step_weights must list draft_steps non-negative numbers, not all zero")
        if self.temperature <= 0 or self.learning_rate <= 0 or not 0 <= self.min_lr_ratio <= 1:
            raise ValueError("need temperature > 0, learning_rate > 0 and 0 <= min_lr_ratio <= 1")
        if min(self.batch_size, self.grad_accum, self.epochs, self.max_bases, self.eval_pages, self.checkpoint_every) < 1:
            raise ValueError("batch_size, grad_accum, epochs, max_bases, eval_pages and checkpoint_every must be >= 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError("max_steps must be >= 1")
        if not 0 < self.eval_fraction < 1:
            raise ValueError("eval_fraction must be between 0 and 1")
        return self

    def weights(self) -> list[float]:
        """Loss weight of each draft step, summing to 1."""
        if self.step_weights == "equal":
            raw = [1.0] * self.draft_steps
        elif self.step_weights == "decay":
            raw = [0.8**j for j in range(self.draft_steps)]
        else:
            raw = list(self.step_weights)
        return [w / sum(raw) for w in raw]


def load_train_config(path: Path | None = None, **overrides) -> TrainConfig:
    """Defaults from `path` (or configs/train_mtp.toml), then the overrides that are not None."""
    source = path or configs_dir() / "train_mtp.toml"
    data = _load_toml(source) if source.exists() or path is not None else {}
    data.update({key: value for key, value in overrides.items() if value is not None})
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"bad training setting{f' {key}' if key else ''}: {message} (defaults from {source})") from None
