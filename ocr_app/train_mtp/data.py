"""Training data: pages rasterized exactly as inference does, read once by the frozen main model, cached.

A page is named by a stable id: `relative/path.pdf#3` for page 3 of a document
under the data folder, `synth:SEED` for a synthetic page (`ocr_app.synth`,
when that module is installed), and `PAGE~2` for band 2 of a page when the
model reads pages as bands (`ocr_app.regions`).  The main model's greedy output for every page
goes to `reads.jsonl` in the cache folder as soon as it is produced, so a rerun
(or a run killed while reading) never reads a page twice; `meta.json` records
what the reads depend on (model, prompt, pixel budget, dpi, max tokens) and a
cache made under other settings is refused rather than silently mixed in.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

from PIL import Image

from ocr_app.config import PixelBudget, RegionSplit, page_budget
from ocr_app.documents import find_documents, open_document
from ocr_app.engines.protocol import Engine, GenerationSettings
from ocr_app.errors import ConfigError, InputError
from ocr_app.pages import fit_image, iter_pages, prefetch, to_rgb
from ocr_app.regions import split_page

SYNTH_PREFIX = "synth:"
BAND_MARK = "~"
READS_FILE = "reads.jsonl"
META_FILE = "meta.json"


@dataclass(frozen=True)
class PageRef:
    page_id: str
    document: Path | None  # None for a synthetic page
    number: int  # 1-based page number, or the synthetic seed
    # Set for a model that reads pages as bands (`ocr_app.regions`): this ref is band `band` of the page.
    regions: RegionSplit | None = None
    band: int = 0


@dataclass(frozen=True)
class PageRead:
    """One page as the main model read it: the training example's prompt and target tokens."""

    page_id: str
    prompt: str
    token_ids: tuple[int, ...]  # greedy output, stop token excluded
    finish_reason: str


def document_pages(data_dir: Path) -> tuple[list[PageRef], list[str]]:
    """Every page of every document under `data_dir`, and one line per document that cannot be opened."""
    refs: list[PageRef] = []
    problems: list[str] = []
    for path in find_documents([data_dir]):
        try:
            document = open_document(path)
        except InputError as exc:
            problems.append(str(exc))
            continue
        name = path.relative_to(data_dir).as_posix() if data_dir.is_dir() else path.name
        refs.extend(PageRef(f"{name}#{n}", path, n) for n in range(1, document.page_count + 1))
    return refs, problems


def synth_pages(count: int, first_seed: int = 0) -> list[PageRef]:
    return [PageRef(f"{SYNTH_PREFIX}{seed}", None, seed) for seed in range(first_seed, first_seed + count)]


# Bands are drawn one at a time, in shuffled order: the bands of the last pages cut are kept, so a page is
# not rendered again for each of its bands (~15 line bands of an 864-px page take ~2 MB).
PAGES_KEPT = 64


def _page_image(document: Path | None, number: int, budget: PixelBudget, dpi: int) -> Image.Image:
    if document is None:
        try:
            from ocr_app.synth import render_sample
        except ImportError:
            raise ConfigError("synthetic pages need ocr_app.synth, which this install lacks") from None
        image, _ = render_sample(number, level="page")
        return fit_image(to_rgb(image), budget)
    return next(iter_pages(open_document(document), [number], budget, dpi)).image


@lru_cache(maxsize=PAGES_KEPT)
def _page_bands(document: Path | None, number: int, budget: PixelBudget, dpi: int, regions: RegionSplit) -> tuple[Image.Image, ...]:
    return tuple(split_page(_page_image(document, number, page_budget(budget, regions), dpi), regions, budget))


def render_page(ref: PageRef, budget: PixelBudget, dpi: int) -> Image.Image:
    """The page image (or band of it) exactly as `ocr-read` would give it to the model."""
    if ref.regions is None:
        return _page_image(ref.document, ref.number, budget, dpi)
    return _page_bands(ref.document, ref.number, budget, dpi, ref.regions)[ref.band]


def band_refs(refs: list[PageRef], regions: RegionSplit, budget: PixelBudget, dpi: int) -> tuple[list[PageRef], list[str]]:
    """Each page's bands as refs of their own (`PAGE~BAND`), for a model that reads pages as bands; and one
    line per page that cannot be rendered."""
    bands: list[PageRef] = []
    problems: list[str] = []
    for ref in refs:
        try:
            count = len(_page_bands(ref.document, ref.number, budget, dpi, regions))
        except InputError as exc:
            problems.append(str(exc))
            continue
        bands.extend(replace(ref, page_id=f"{ref.page_id}{BAND_MARK}{band}", regions=regions, band=band) for band in range(count))
    return bands, problems


def split_pages(refs: list[PageRef], eval_fraction: float, seed: int) -> tuple[list[PageRef], list[PageRef]]:
    """(train, held out): whole documents are held out, so no page of a held-out document trains."""
    groups: dict[str, list[PageRef]] = {}
    for ref in refs:
        page_id = ref.page_id.rsplit(BAND_MARK, 1)[0] if ref.regions is not None else ref.page_id
        groups.setdefault(page_id.rsplit("#", 1)[0], []).append(ref)
    units = list(groups.values()) if len(groups) > 1 else [[ref] for ref in refs]
    random.Random(seed).shuffle(units)
    wanted = max(1, round(eval_fraction * len(refs)))
    held_out: list[PageRef] = []
    while units and len(held_out) < wanted and len(units) > 1:
        held_out.extend(units.pop())
    train = [ref for unit in units for ref in unit]
    order = {ref.page_id: i for i, ref in enumerate(refs)}
    return sorted(train, key=lambda r: order[r.page_id]), sorted(held_out, key=lambda r: order[r.page_id])


class ReadCache:
    """The main model's reads on disk, one JSON line per page."""

    def __init__(self, folder: Path, meta: dict):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        meta_path = folder / META_FILE
        if meta_path.exists():
            stored = json.loads(meta_path.read_text())
            if stored != meta:
                changed = sorted(key for key in meta.keys() | stored.keys() if stored.get(key) != meta.get(key))
                raise ConfigError(
                    f"read cache {folder} was made with other settings ({', '.join(changed)}); use another --work-dir"
                )
        else:
            meta_path.write_text(json.dumps(meta, indent=2) + "\n")
        self.reads: dict[str, PageRead] = {}
        reads_path = folder / READS_FILE
        if reads_path.exists():
            for line in reads_path.read_text().splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # the last line of a killed run
                    continue
                self.reads[record["page_id"]] = PageRead(**{**record, "token_ids": tuple(record["token_ids"])})

    def add(self, read: PageRead) -> None:
        with (self.folder / READS_FILE).open("a") as handle:
            handle.write(json.dumps(asdict(read)) + "\n")
        self.reads[read.page_id] = read


def read_pages(
    refs: Iterable[PageRef],
    engine: Engine,
    settings: GenerationSettings,
    cache: ReadCache,
    prompt: str,
    budget: PixelBudget,
    dpi: int,
    concurrency: int = 1,
    on_read: Callable[[PageRead], None] = lambda read: None,
) -> list[str]:
    """Have the main model read every page not yet in the cache; returns one line per page that failed."""
    problems: list[str] = []

    def images() -> Iterator[tuple[str, Image.Image]]:
        for ref in refs:
            if ref.page_id in cache.reads:
                continue
            try:
                yield ref.page_id, render_page(ref, budget, dpi)
            except InputError as exc:
                problems.append(str(exc))

    for page_id, text in engine.read_many(prefetch(images()), settings, concurrency):
        read = PageRead(page_id, prompt, tuple(text.token_ids), text.metrics.finish_reason)
        cache.add(read)
        on_read(read)
    return problems
