"""`ocr-read` end to end on the tiny model: outputs, formats, and bad input without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pymupdf
import pytest
from typer.testing import CliRunner

from ocr_app.cli.read import app

from .conftest import PROJECT_ROOT, SAMPLE_PDF
from .test_documents import make_pdf

runner = CliRunner()


def run_read(*args: str):
    result = runner.invoke(app, [*map(str, args)], catch_exceptions=False)
    assert "Traceback" not in result.output + result.stderr
    return result


@pytest.fixture
def model_args(tiny_model_dir) -> list[str]:
    return ["--model", str(tiny_model_dir), "--engine", "hf", "--drafts", "0", "--max-tokens", "8"]


def test_sample_pdf_to_markdown_in_a_real_process(tmp_path, tiny_model_dir):
    out = tmp_path / "out.md"
    completed = subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.read", str(SAMPLE_PDF), "-o", str(out),
         "--model", str(tiny_model_dir), "--drafts", "0", "--max-tokens", "8"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr
    markdown = out.read_text()
    assert markdown.startswith("<!-- page 1 -->") and "<!-- page 2 -->" in markdown
    assert "1/1 documents, 2 pages" in completed.stderr


def test_json_format_has_per_page_metrics(tmp_path, model_args):
    out = tmp_path / "out.json"
    result = run_read(SAMPLE_PDF, "-o", out, "--format", "json", "--pages", "2", *model_args)
    assert result.exit_code == 0
    data = json.loads(out.read_text())
    (page,) = data["pages"]
    assert page["page"] == 2 and data["engine"] == "hf" and data["drafts"] == 0
    metrics = page["metrics"]
    assert metrics["prompt_tokens"] > 0 and 0 < metrics["output_tokens"] <= 8
    assert metrics["finish_reason"] in ("stop", "length")


def test_several_documents_with_one_corrupt(tmp_path, model_args):
    good = make_pdf(tmp_path / "iyi.pdf", pages=2)
    bad = tmp_path / "bozuk.pdf"
    bad.write_bytes(good.read_bytes()[:200])
    image = tmp_path / "foto.png"
    pymupdf.open(good)[0].get_pixmap(dpi=50).save(image)
    out = tmp_path / "out"
    result = run_read(good, bad, image, "-o", out, *model_args)
    assert result.exit_code == 1
    assert sorted(p.name for p in out.iterdir()) == ["foto.md", "iyi.md"]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "bozuk.pdf" in errors[0]


def test_folder_input_mirrors_tree(tmp_path, model_args):
    source = tmp_path / "girdi"
    (source / "alt klasör").mkdir(parents=True)
    make_pdf(source / "a.pdf", pages=1)
    make_pdf(source / "alt klasör" / "b.pdf", pages=1)
    out = tmp_path / "çıktı"
    assert run_read(source, "-o", out, *model_args).exit_code == 0
    assert (out / "a.md").exists() and (out / "alt klasör" / "b.md").exists()


def bad_input(kind: str, folder: Path) -> Path:
    path = folder / {"missing": "yok.pdf", "empty": "bos.pdf", "text": "x.txt", "folder": "boş klasör"}.get(kind, "")
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("merhaba")
    elif kind == "folder":
        path.mkdir()
    elif kind == "encrypted":
        path = make_pdf(folder / "gizli.pdf", password="s3cret")
    return path


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("missing", "no such file"),
        ("empty", "empty file"),
        ("text", "unsupported format"),
        ("folder", "no documents"),
        ("encrypted", "--password"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(tmp_path, model_args, kind, expected):
    path = bad_input(kind, tmp_path)
    result = run_read(path, "-o", tmp_path / "out.md", *model_args)
    assert result.exit_code == 1
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and expected in error_lines[0]
    assert not (tmp_path / "out.md").exists()


def test_unwritable_output_path(tmp_path, model_args):
    blocker = tmp_path / "dosya"
    blocker.write_text("a file where a folder should be")
    result = run_read(SAMPLE_PDF, "-o", blocker / "out.md", *model_args)
    assert result.exit_code == 1 and "cannot write" in result.stderr


def test_bad_options_are_reported(tmp_path, model_args):
    assert "bad page range" in run_read(SAMPLE_PDF, "--pages", "5-2", "-o", tmp_path / "o.md", *model_args).stderr
    assert "past the last page" in run_read(SAMPLE_PDF, "--pages", "9", "-o", tmp_path / "o.md", *model_args).stderr
    result = run_read(SAMPLE_PDF, "--format", "html", *model_args)
    assert result.exit_code == 1 and "unknown format" in result.stderr
    result = run_read(SAMPLE_PDF, "--model", "yok-boyle-model")
    assert result.exit_code == 1 and "unknown model" in result.stderr


def test_missing_model_folder_is_explained(tmp_path):
    (tmp_path / "bos_model").mkdir()
    result = run_read(SAMPLE_PDF, "--model", tmp_path / "bos_model", "--drafts", "0")
    assert result.exit_code == 1 and "no config.json" in result.stderr


def test_stdout_when_no_output_given(model_args):
    result = run_read(SAMPLE_PDF, "--pages", "1", *model_args)
    assert result.exit_code == 0 and result.stdout.startswith("<!-- page 1 -->")


def test_dash_output_means_stdout(model_args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_read(SAMPLE_PDF, "--pages", "1", "-o", "-", *model_args)
    assert result.exit_code == 0 and result.stdout.startswith("<!-- page 1 -->")
    assert not (tmp_path / "-").exists()


def without_vllm(monkeypatch) -> None:
    """As in an install without vLLM: its package is not found."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name == "vllm" else find_spec(name, *args))


def test_default_engine_is_vllm_for_folders_where_installed_and_hf_for_a_document(monkeypatch):
    from ocr_app.engine_factory import default_engine, installed

    assert installed("hf")
    assert default_engine(folder=False) == "hf"
    assert default_engine(folder=True) == ("vllm" if installed("vllm") else "hf")
    assert default_engine(folder=False, servers=("http://127.0.0.1:8000",)) == "vllm"
    without_vllm(monkeypatch)
    assert default_engine(folder=True) == "hf"


def test_folder_run_without_vllm_reads_with_hf_and_an_explicit_engine_wins(tmp_path, tiny_model_dir, monkeypatch):
    from ocr_app.batch.command import recorded_settings

    source = tmp_path / "girdi"
    source.mkdir()
    make_pdf(source / "a.pdf", pages=1)
    options = ["--model", tiny_model_dir, "--drafts", "0", "--max-tokens", "4"]
    assert run_read(source, "-o", tmp_path / "explicit", "--engine", "hf", *options).exit_code == 0
    assert recorded_settings(tmp_path / "explicit").engine == "hf"  # vLLM, installed or not, is not started
    without_vllm(monkeypatch)
    assert run_read(source, "-o", tmp_path / "default", *options).exit_code == 0
    assert recorded_settings(tmp_path / "default").engine == "hf"


def test_a_single_document_is_read_with_hf_by_default(tmp_path, tiny_model_dir):
    out = tmp_path / "out.json"
    result = run_read(SAMPLE_PDF, "-o", out, "--format", "json", "--pages", "1", "--model", tiny_model_dir,
                      "--drafts", "0", "--max-tokens", "4")
    assert result.exit_code == 0 and json.loads(out.read_text())["engine"] == "hf"
