"""Presets from `configs/`, validated on load into small typed objects.

`configs/models/NAME.toml` describes a model (where it is, what to ask it, how
many pixels a page may have); `configs/modes.toml` describes the two ways of
reading (`low-latency`, `bulk`) and, in its `[ray]` table, how a folder run is
spread over a Ray cluster.  Relative model paths are relative to the project
root, the folder that holds `configs/`.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ocr_app.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MODE_NAMES = ("low-latency", "bulk")
ModeName = Literal["low-latency", "bulk"]


def configs_dir() -> Path:
    return Path(os.environ.get("OCR_APP_CONFIGS", PROJECT_ROOT / "configs"))


# A model folder's own preset: how the model must be prompted and fed (keys of ModelPreset but path).
FOLDER_PRESET_NAME = "ocr_app.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PixelBudget(_Strict):
    """How many pixels a page image may have once fitted for the vision encoder.

    Sides are snapped to multiples of `factor`: Qwen3.5 uses 16-px patches merged
    2x2, so one visual token covers 32x32 px.
    """

    min_pixels: int
    max_pixels: int
    factor: int = 32

    @model_validator(mode="after")
    def _ordered(self) -> PixelBudget:
        if not 0 < self.min_pixels <= self.max_pixels:
            raise ValueError("need 0 < min_pixels <= max_pixels")
        if self.max_pixels < self.factor * self.factor:
            raise ValueError(f"max_pixels must hold at least one {self.factor}x{self.factor} tile")
        return self


class RetryPreset(_Strict):
    """How a page whose output ran to max tokens in a repetition loop is read again (once) on an engine
    that cannot ban loops exactly with drafts (remote `vllm serve` endpoints; see `ocr_app.repetition`):
    greedy decoding would loop the same way again, a little temperature lets the model leave the loop, and a
    fixed seed keeps the retry reproducible.  Engines that ban loops (hf, vLLM in-process) re-read greedily
    and need none of this.
    """

    temperature: float = 0.4
    top_p: float = 0.95
    seed: int = 0


class RegionSplit(_Strict):
    """How a page is cut into bands of text lines for a model that reads blocks (`ocr_app.regions`).

    Pixels are the page's as the model gets it (fitted to the pixel budget).
    """

    max_height: int = 320  # rows of ink: a band taller than this is cut, where a blank run allows
    min_gap: int = 4  # blank rows a cut needs
    margin: int = 40  # rows of paper kept above and below a band's ink
    crop_columns: bool = False  # each band is also cut to its ink's columns (plus margin), as a line is trained
    # A band too tall with no blank run is cut where its rows are light (between lines set tight), not kept.
    cut_between_lines: bool = False
    # A page whose lines' median height (`regions.line_height`: rows of a band's letters, not its rules, accents
    # or tails) is under this many rows has its bands enlarged to it (at most MAX_ENLARGEMENT times; margins are
    # in enlarged rows): a small reader reads small type better enlarged.
    text_height: int | None = None
    # A band whose ink parts at blank columns this many times its line's height wide (a table's row, columns
    # set apart by space: words are a third of it apart) is read cell by cell and written as a table row.
    cell_gap: float | None = None
    # A band crossed by vertical rules (a ruled table's row; the rules are erased before the cut) is read cell by
    # cell between them and written as a table row: a scan's erased borders leave its columns too close to part.
    rule_cells: bool = False
    # A line wider than this many times its height is read in chunks cut at word gaps, joined by spaces.
    chunk_width: float | None = None
    # A skewed page (a scan's, turned by a degree or two) is turned upright before it is cut: skewed lines run
    # into each other's rows, and no blank row parts them.
    deskew: bool = False
    # Each band keeps only its own lines' ink (`regions.own_ink`): cut between lines set tight, a band's edge rows
    # hold specks of its neighbours' descenders and accents.
    own_ink: bool = False
    # Each band reaches over the faint rows beside its ink (`regions.faint_edges`): the rows through a small line's
    # descender tails and capitals' accents hold too little ink to count as the band's, and were cut off.
    faint_edges: bool = False
    # A band still two lines high or more once cut between its lines (ink beside them fills the rows between:
    # a logo by an address block) is cut into blocks at wide blank columns, each block read as bands of its own.
    column_blocks: bool = False
    # Ink joined into a piece both higher and wider than this many times the page's letters (`regions.graphics`:
    # a QR code, an emblem, a signature, a stamp's large letters) is painted over before the cut: cut as a band,
    # it was read as invented text.
    graphic_size: float | None = None
    # Pages are rendered (and images kept) with up to this many pixels, and each band's image is taken from that
    # sharper page (`regions.page_regions`); the cut itself is still made on the page fitted to the model's pixel
    # budget, which every other key here is measured in.  An A4 page at 200 dpi is 3.9 MP: its 9-pt type,
    # 10 rows high in a 1.1-MP page, is enlarged from its own strokes instead of from their blur.
    page_pixels: int | None = None

    @model_validator(mode="after")
    def _positive(self) -> RegionSplit:
        if self.max_height < 32 or self.min_gap < 1 or self.margin < 0 or (self.text_height or 8) < 8:
            raise ValueError("need max_height >= 32, min_gap >= 1, margin >= 0 and text_height >= 8")
        if self.cell_gap is not None and (self.cell_gap <= 0 or not self.crop_columns):
            raise ValueError("cell_gap must be positive and needs crop_columns")
        if self.rule_cells and not self.crop_columns:
            raise ValueError("rule_cells needs crop_columns")
        if self.graphic_size is not None and self.graphic_size <= 1:
            raise ValueError("graphic_size must be over 1 (letters are 1)")
        if self.chunk_width is not None and (self.chunk_width <= 0 or not self.crop_columns):
            raise ValueError("chunk_width must be positive and needs crop_columns")
        return self


class AutoDraftsPreset(_Strict):
    """What `--drafts auto` (`ocr_app.speculative.auto`) starts from before the run has measured anything.

    `acceptance[i]` is the share of drafts whose token at position i+1 was accepted (as `SpecDecodingStats`
    and vLLM count it, so it never grows with i): the prior that the run's own counts are blended with,
    weighing as much as `prior_weight` rounds at each position.  Empty: no prior (an even chance per position,
    weighing two rounds).  `verify_cost` (ms of one main-model forward over T new tokens, by T) and
    `draft_cost` (ms of one head step) are recorded costs, for engines that fix K before they can time
    anything (vLLM); the hf engine times its own at start.
    """

    acceptance: list[float] = []
    prior_weight: int = 32
    verify_cost: dict[int, float] | None = None
    draft_cost: float | None = None

    @model_validator(mode="after")
    def _sane(self) -> AutoDraftsPreset:
        if any(not 0 <= rate <= 1 for rate in self.acceptance):
            raise ValueError("acceptance rates must be between 0 and 1")
        if any(later > earlier for earlier, later in zip(self.acceptance, self.acceptance[1:])):
            raise ValueError("acceptance cannot grow with the draft position (position i needs positions before it)")
        if self.prior_weight < 1:
            raise ValueError("prior_weight must be at least 1")
        if self.verify_cost is not None and (1 not in self.verify_cost or len(self.verify_cost) < 2
                                             or any(t < 1 or ms <= 0 for t, ms in self.verify_cost.items())):
            raise ValueError("verify_cost needs positive ms for T = 1 and at least one more T")
        if (self.verify_cost is None) != (self.draft_cost is None) or (self.draft_cost is not None and self.draft_cost < 0):
            raise ValueError("verify_cost and draft_cost go together, and draft_cost cannot be negative")
        return self


class ModelPreset(_Strict):
    name: str
    path: Path
    prompt: str
    use_chat_template: bool = True
    max_tokens: int = 2048
    hf_dtype: Literal["float32", "bfloat16"] = "float32"
    # CPU threads the hf engine's torch uses (None: torch's default, one per core).  A model this small
    # gains nothing from a second thread, and on a busy machine two threads wait on each other: one page
    # of ocr-tiny-tr took 218 s with two, 46 s with one (docs/speed.md).
    hf_threads: int | None = None
    pixels: PixelBudget
    # Per-mode draft counts for this model; missing modes use configs/modes.toml.
    drafts: dict[ModeName, int] = {}
    retry: RetryPreset = RetryPreset()
    # Set for a model trained on blocks, not whole pages: each page is read as bands of lines.
    regions: RegionSplit | None = None
    # What `--drafts auto` starts from (acceptance prior, recorded costs).
    auto_drafts: AutoDraftsPreset = AutoDraftsPreset()

    def resolved_path(self) -> Path:
        return self.path if self.path.is_absolute() else PROJECT_ROOT / self.path

    @property
    def page_pixels(self) -> PixelBudget:
        """The budget pages are rendered and kept at (`page_budget`)."""
        return page_budget(self.pixels, self.regions)


def page_budget(pixels: PixelBudget, regions: RegionSplit | None) -> PixelBudget:
    """The budget a page is rendered and kept at for a model with pixel budget `pixels` that cuts pages as
    `regions` says: up to `regions.page_pixels` when set (its bands are taken from the sharper page), else
    `pixels`."""
    if regions is None or regions.page_pixels is None:
        return pixels
    return pixels.model_copy(update={"max_pixels": max(pixels.max_pixels, regions.page_pixels)})


class EngineDefaults(_Strict):
    """The engines `ocr-read` tries, in order, when no --engine is given: the first one installed reads.
    `document` serves single documents (low latency, first text soonest), `folder` folder runs (bulk)."""

    document: tuple[Literal["hf", "vllm"], ...]
    folder: tuple[Literal["hf", "vllm"], ...]


class ModePreset(_Strict):
    name: ModeName
    drafts: int
    concurrency: int
    stream: bool


def _load_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def _validate(model: type[BaseModel], data: dict, source: Path):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ConfigError(f"{source}: bad key '{key}': {first['msg']}") from None


def load_model_preset(spec: str | Path) -> ModelPreset:
    """A preset name (`configs/models/NAME.toml`), a preset file, or a model folder.

    A model folder is read with the prompt and budget it was trained with when it
    carries them (`ocr_app.toml`, written by `ocr-train-ocr export`); otherwise
    with those of the defaults' folder preset (`configs/defaults.toml`).  A preset whose `path` is such a folder
    starts from the folder's keys and overrides what it names.
    """
    candidate = Path(spec)
    if candidate.is_dir():
        folder_preset = candidate / FOLDER_PRESET_NAME
        if folder_preset.exists():
            data = {"name": candidate.name, **_load_toml(folder_preset), "path": candidate.resolve()}
            return _validate(ModelPreset, data, folder_preset)
        base = load_model_preset(_defaults()["folder"])
        return base.model_copy(update={"name": candidate.name, "path": candidate.resolve()})
    path = candidate if candidate.suffix == ".toml" else configs_dir() / "models" / f"{spec}.toml"
    if not path.exists():
        known = sorted(p.stem for p in (configs_dir() / "models").glob("*.toml"))
        raise ConfigError(f"unknown model '{spec}': not a model folder nor a preset (presets: {', '.join(known)})")
    data = {"name": path.stem, **_load_toml(path)}
    folder_preset = PROJECT_ROOT / data.get("path", "") / FOLDER_PRESET_NAME
    if "path" in data and folder_preset.exists():
        data = {**_load_toml(folder_preset), **data}
    return _validate(ModelPreset, data, path)


class RayPreset(_Strict):
    """How a folder run is spread over a Ray cluster (`ocr-read DIR -o OUT --ray`, `ocr_app.batch.ray_run`).

    A replica is one Ray actor holding one engine (the model, with its MTP head); it is handed
    `batch_size` pages at a time and reads them with the mode's concurrency.  Pages are opened and
    rendered by up to `raster_tasks` Ray tasks at once, each taking `raster_cpus`.
    """

    replicas: int = 1
    cpus_per_replica: float = 1.0
    gpus_per_replica: float = 0.0
    batch_size: int = 16
    raster_tasks: int = 2
    raster_cpus: float = 1.0
    # How long the replicas may take to start (an autoscaler adding nodes, models loading) before the run
    # gives up: the cluster cannot hold that many.
    start_timeout_s: int = 600

    @model_validator(mode="after")
    def _positive(self) -> RayPreset:
        if self.replicas < 1 or self.batch_size < 1 or self.raster_tasks < 1 or self.start_timeout_s < 1:
            raise ValueError("need replicas, batch_size, raster_tasks and start_timeout_s >= 1")
        if self.cpus_per_replica < 0 or self.gpus_per_replica < 0 or self.raster_cpus < 0:
            raise ValueError("CPUs and GPUs cannot be negative")
        return self


def load_mode_preset(name: str) -> ModePreset:
    path = configs_dir() / "modes.toml"
    table = _load_toml(path)
    if name not in MODE_NAMES or name not in table:
        raise ConfigError(f"unknown mode '{name}' (modes: {', '.join(m for m in MODE_NAMES if m in table)})")
    return _validate(ModePreset, {"name": name, **table[name]}, path)


def load_ray_preset(**overrides) -> RayPreset:
    """The `[ray]` table of `configs/modes.toml`, with the options given (those not None) on top."""
    path = configs_dir() / "modes.toml"
    data = {**_load_toml(path).get("ray", {}), **{key: value for key, value in overrides.items() if value is not None}}
    return _validate(RayPreset, data, path)


def _defaults() -> dict:
    return _load_toml(configs_dir() / "defaults.toml")


def default_model_name() -> str:
    return str(_defaults()["model"])


def engine_defaults() -> EngineDefaults:
    return _validate(EngineDefaults, _defaults().get("engine", {}), configs_dir() / "defaults.toml")


def drafts_for(model: ModelPreset, mode: ModePreset) -> int:
    return model.drafts.get(mode.name, mode.drafts)
