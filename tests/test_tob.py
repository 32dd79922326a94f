"""The benchmark loader on every layout, page selection, and the shipped tob-mini set."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from ocr_app.config import PixelBudget
from ocr_app.errors import InputError
from ocr_app.synth import is_benchmark_seed, make_sample
from ocr_app.tob import UNCATEGORIZED, load_benchmark, select_pages

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TOB_MINI = PROJECT_ROOT / "samples" / "tob-mini"
SMALL = PixelBudget(min_pixels=64 * 64, max_pixels=256 * 256)


def _png(color: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (120, 80), (color, color, color)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_tob_mini_loads_every_page_with_its_category_and_ground_truth():
    pages = load_benchmark(TOB_MINI)
    manifest = json.loads((TOB_MINI / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(page.id for page in pages) == sorted(entry["id"] for entry in manifest)
    assert {page.category for page in pages} == {"invoice", "letter", "article", "receipt", "form"}
    assert all(page.reference.strip() for page in pages)
    image = pages[0].image(SMALL)
    assert image.mode == "RGB" and image.width * image.height <= SMALL.max_pixels and image.width % 32 == 0


def test_tob_mini_pages_come_from_reserved_seeds_and_match_the_generator():
    manifest = json.loads((TOB_MINI / "manifest.json").read_text(encoding="utf-8"))
    assert all(is_benchmark_seed(entry["seed"]) for entry in manifest)
    entry = manifest[0]
    sample = make_sample(entry["seed"], "page", entry["kind"], entry["degradation"], benchmark=True)
    assert (TOB_MINI / f"{entry['id']}.md").read_text(encoding="utf-8") == sample.markdown + "\n"
    total_bytes = sum(path.stat().st_size for path in TOB_MINI.rglob("*") if path.is_file())
    assert total_bytes < 4_000_000


def test_folder_layout_skips_pages_without_ground_truth(tmp_path):
    (tmp_path / "fatura").mkdir()
    (tmp_path / "fatura" / "a.png").write_bytes(_png(200))
    (tmp_path / "fatura" / "a.md").write_text("# Fatura", encoding="utf-8")
    (tmp_path / "fatura" / "b.png").write_bytes(_png(100))  # no b.md
    (tmp_path / "c.png").write_bytes(_png(50))
    (tmp_path / "c.md").write_text("kök", encoding="utf-8")
    pages = load_benchmark(tmp_path)
    assert [(p.id, p.category, p.reference) for p in pages] == [("c", UNCATEGORIZED, "kök"), ("fatura/a", "fatura", "# Fatura")]


def test_pdf_pages_are_rendered(tmp_path):
    shutil.copy(PROJECT_ROOT / "samples" / "fatura.pdf", tmp_path / "fatura.pdf")
    (tmp_path / "fatura.md").write_text("Fatura", encoding="utf-8")
    assert load_benchmark(tmp_path)[0].image(SMALL).mode == "RGB"


def test_metadata_jsonl_layout(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "p1.png").write_bytes(_png(10))
    records = [{"id": "p1", "file": "img/p1.png", "category": "mektup", "text": "Sayın Ayşe Hanım,"}]
    (tmp_path / "metadata.jsonl").write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    [page] = load_benchmark(tmp_path)
    assert (page.id, page.category, page.reference) == ("p1", "mektup", "Sayın Ayşe Hanım,")
    assert page.image().getpixel((0, 0)) == (10, 10, 10)
    (tmp_path / "metadata.jsonl").write_text('{"id": "p2", "file": "img/yok.png", "text": "x"}', encoding="utf-8")
    with pytest.raises(InputError, match="does not exist"):
        load_benchmark(tmp_path)


def _hf_table() -> pa.Table:
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    return pa.table({
        "id": ["r1", "r2"],
        "image": pa.array([{"bytes": _png(30), "path": None}, {"bytes": _png(60), "path": None}], type=image_type),
        "markdown": ["# Başlık", "| a | b |"],
        "category": ["makale", "fatura"],
    })


def test_parquet_layout_with_datasets_image_structs(tmp_path):
    (tmp_path / "data").mkdir()
    pq.write_table(_hf_table(), tmp_path / "data" / "test-00000-of-00001.parquet")
    pages = load_benchmark(tmp_path)
    assert [(p.id, p.category, p.reference) for p in pages] == [("r1", "makale", "# Başlık"), ("r2", "fatura", "| a | b |")]
    assert pages[1].image().getpixel((5, 5)) == (60, 60, 60)


def test_arrow_stream_layout_as_save_to_disk_writes_it(tmp_path):
    table = _hf_table()
    with pa.OSFile(str(tmp_path / "data-00000-of-00001.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    assert [p.id for p in load_benchmark(tmp_path)] == ["r1", "r2"]


def test_table_without_a_text_column_is_refused(tmp_path):
    pq.write_table(pa.table({"image": [_png(1)], "caption": ["x"]}), tmp_path / "x.parquet")
    with pytest.raises(InputError, match="text column"):
        load_benchmark(tmp_path / "x.parquet")


def test_missing_path_and_unreachable_hub_give_clear_errors(tmp_path):
    with pytest.raises(InputError, match="no such benchmark"):
        load_benchmark(tmp_path / "yok")
    with pytest.raises(InputError, match="cannot be fetched"):
        load_benchmark("no-such-owner-xyz/no-such-dataset-xyz")


def test_every_keeps_all_categories_and_limit_spreads_over_them():
    pages = load_benchmark(TOB_MINI)
    every_fourth = select_pages(pages, every=4)
    assert {p.category for p in every_fourth} == {p.category for p in pages}
    assert len(every_fourth) == 5 * 2  # 6 pages per category -> indexes 0 and 4
    limited = select_pages(pages, limit=5)
    assert len({p.category for p in limited}) == 5
    with pytest.raises(InputError):
        select_pages(pages, every=0)
