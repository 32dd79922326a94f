"""TurkishOCR-Bench (TOB) style benchmark data: pages with ground-truth text and a category.

Three layouts are read; `load_benchmark` tells them apart by what the folder holds.

Folder layout
    DATA/<category>/<name>.(png|jpg|pdf|...) with DATA/<category>/<name>.md beside it.
    The category is the page's folder (relative to DATA; files directly in DATA are
    "uncategorized"); the id is the path without its suffix.  Pages without a `.md`
    are skipped and counted.

metadata.jsonl layout
    DATA/metadata.jsonl, one JSON object per line with `id`, `file` (relative to
    DATA), `category` and `text` (the ground truth).

Hugging Face datasets layout
    Parquet files (`DATA/**/*.parquet`, as on the hub) or Arrow files written by
    `datasets.save_to_disk` (`DATA/**/*.arrow`), read with pyarrow; DATA may also be
    one such file.  Columns are found by name: the image (`image`, `img`, `page`;
    a datasets Image struct `{bytes, path}` or raw bytes), the text (`text`,
    `markdown`, `ground_truth`, `gt`, `md`, `label`), the category (`category`,
    `type`, `doc_type`, `domain`; "uncategorized" if none) and the id (`id`,
    `page_id`, `file_name`, `filename`; else `<file>-<row>`).  A hub id
    (`owner/name`) instead of a path is downloaded with huggingface_hub when the
    hub is reachable, then read as above.

A PDF counts as one page: its first page is read.  `select_pages` applies
`--every N` (every Nth page within each category, so every category stays in)
and `--limit N` (taken round-robin over the categories).
"""

from __future__ import annotations

import io
import json
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from ocr_app.config import PixelBudget
from ocr_app.documents import DOCUMENT_SUFFIXES, MAX_IMAGE_PIXELS, open_document
from ocr_app.errors import InputError
from ocr_app.pages import DEFAULT_DPI, fit_image, iter_pages, to_rgb

UNCATEGORIZED = "uncategorized"
# Original resolution (PDFs at the default DPI), for engines that take any size.
FULL_SIZE = PixelBudget(min_pixels=32 * 32, max_pixels=MAX_IMAGE_PIXELS)
IMAGE_COLUMNS = ("image", "img", "page", "png", "jpg")
TEXT_COLUMNS = ("text", "markdown", "ground_truth", "gt", "md", "label", "answer")
CATEGORY_COLUMNS = ("category", "type", "doc_type", "domain", "class")
ID_COLUMNS = ("id", "page_id", "file_name", "filename", "name")


@dataclass(frozen=True)
class BenchmarkPage:
    id: str
    category: str
    reference: str  # ground-truth Markdown
    source: str  # where the image comes from, for messages
    load: Callable[[PixelBudget], Image.Image] = field(repr=False, compare=False)

    def image(self, budget: PixelBudget = FULL_SIZE) -> Image.Image:
        """The page as RGB, fitted to `budget` exactly as `ocr-read` fits pages."""
        return self.load(budget)


def _file_loader(path: Path) -> Callable[[PixelBudget], Image.Image]:
    def load(budget: PixelBudget) -> Image.Image:
        return next(iter_pages(open_document(path), [1], budget, DEFAULT_DPI)).image

    return load


def _bytes_loader(data: bytes, source: str) -> Callable[[PixelBudget], Image.Image]:
    def load(budget: PixelBudget) -> Image.Image:
        try:
            with Image.open(io.BytesIO(data)) as image:
                return fit_image(to_rgb(image), budget)
        except (UnidentifiedImageError, OSError) as exc:
            raise InputError(f"{source}: image cannot be decoded ({exc})") from None

    return load


def load_benchmark(spec: str | Path) -> list[BenchmarkPage]:
    """Every page of the benchmark at `spec` (a folder, a parquet/arrow file, or a hub id)."""
    path = Path(spec)
    if not path.exists():
        if re.fullmatch(r"[\w.-]+/[\w.-]+", str(spec)):
            return _load_table_files(_download(str(spec)))
        raise InputError(f"{spec}: no such benchmark folder or file")
    if path.is_file():
        if path.suffix not in (".parquet", ".arrow"):
            raise InputError(f"{path}: expected a folder, a .parquet or an .arrow file")
        return _load_table_files(path)
    if (path / "metadata.jsonl").exists():
        return _load_metadata(path)
    if any(path.rglob("*.parquet")) or any(path.rglob("*.arrow")):
        return _load_table_files(path)
    return _load_folder(path)


def _load_folder(root: Path) -> list[BenchmarkPage]:
    pages = []
    for file in sorted(root.rglob("*")):
        if file.suffix.lower() not in DOCUMENT_SUFFIXES or not file.is_file():
            continue
        truth = file.with_suffix(".md")
        if not truth.exists():
            continue
        relative = file.relative_to(root)
        category = relative.parent.as_posix() if relative.parent != Path(".") else UNCATEGORIZED
        pages.append(BenchmarkPage(
            id=relative.with_suffix("").as_posix(),
            category=category,
            reference=truth.read_text(encoding="utf-8"),
            source=str(file),
            load=_file_loader(file),
        ))
    if not pages:
        raise InputError(f"{root}: no pages found (expected images or PDFs with a .md ground truth beside each)")
    return pages


def _load_metadata(root: Path) -> list[BenchmarkPage]:
    pages = []
    lines = (root / "metadata.jsonl").read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            file = root / record["file"]
            page = BenchmarkPage(
                id=str(record.get("id") or Path(record["file"]).with_suffix("").as_posix()),
                category=str(record.get("category") or UNCATEGORIZED),
                reference=record["text"],
                source=str(file),
                load=_file_loader(file),
            )
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(f"{root / 'metadata.jsonl'}: line {number} is not a page record ({exc!r})") from None
        if not file.exists():
            raise InputError(f"{root / 'metadata.jsonl'}: line {number}: {file} does not exist")
        pages.append(page)
    if not pages:
        raise InputError(f"{root / 'metadata.jsonl'}: no pages")
    return pages


def _read_table(file: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if file.suffix == ".parquet":
            return pq.read_table(file)
        with pa.memory_map(str(file)) as source:
            try:
                return pa.ipc.open_stream(source).read_all()  # datasets.save_to_disk writes streams
            except pa.ArrowInvalid:
                source.seek(0)
                return pa.ipc.open_file(source).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{file}: not a readable {file.suffix[1:]} file ({exc})") from None


def _pick(names: list[str], candidates: tuple[str, ...]) -> str | None:
    lowered = {name.lower(): name for name in names}
    return next((lowered[c] for c in candidates if c in lowered), None)


def _load_table_files(location: Path) -> list[BenchmarkPage]:
    files = [location] if location.is_file() else sorted([*location.rglob("*.parquet"), *location.rglob("*.arrow")])
    pages = []
    for file in files:
        table = _read_table(file)
        names = table.column_names
        image_column, text_column = _pick(names, IMAGE_COLUMNS), _pick(names, TEXT_COLUMNS)
        if image_column is None or text_column is None:
            raise InputError(
                f"{file}: need an image column ({', '.join(IMAGE_COLUMNS)}) and a text column "
                f"({', '.join(TEXT_COLUMNS)}); it has {', '.join(names)}"
            )
        category_column, id_column = _pick(names, CATEGORY_COLUMNS), _pick(names, ID_COLUMNS)
        rows = table.to_pylist()
        for row_number, row in enumerate(rows):
            source = f"{file}#{row_number}"
            pages.append(BenchmarkPage(
                id=str(row[id_column]) if id_column else f"{file.stem}-{row_number}",
                category=str(row[category_column]) if category_column and row[category_column] else UNCATEGORIZED,
                reference=row[text_column] or "",
                source=source,
                load=_cell_loader(row[image_column], file.parent, source),
            ))
    if not pages:
        raise InputError(f"{location}: no rows in its parquet/arrow files")
    return pages


def _cell_loader(cell, folder: Path, source: str) -> Callable[[PixelBudget], Image.Image]:
    """A datasets Image struct ({bytes, path}), raw bytes, or a path string."""
    if isinstance(cell, dict):
        if cell.get("bytes"):
            return _bytes_loader(cell["bytes"], source)
        cell = cell.get("path")
    if isinstance(cell, bytes):
        return _bytes_loader(cell, source)
    if isinstance(cell, str) and cell:
        return _file_loader(folder / cell)
    raise InputError(f"{source}: no image in this row")


def _download(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, repo_type="dataset", allow_patterns=["*.parquet", "*.arrow"]))
    except Exception as exc:  # offline, unknown repo, no access: all one message
        raise InputError(f"{repo_id}: not a local path, and the hub dataset cannot be fetched ({type(exc).__name__})") from None


def select_pages(pages: list[BenchmarkPage], every: int = 1, limit: int | None = None) -> list[BenchmarkPage]:
    """Every `every`th page within each category, then at most `limit` pages taken round-robin over categories."""
    if every < 1:
        raise InputError(f"--every must be at least 1, got {every}")
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    by_category: dict[str, list[BenchmarkPage]] = defaultdict(list)
    for page in pages:
        by_category[page.category].append(page)
    queues = [category_pages[::every] for _, category_pages in sorted(by_category.items())]
    chosen: list[BenchmarkPage] = []
    depth = 0
    while any(depth < len(queue) for queue in queues):
        chosen += [queue[depth] for queue in queues if depth < len(queue)]
        depth += 1
    return chosen[:limit] if limit is not None else chosen
