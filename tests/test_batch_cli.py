"""Folder runs through `ocr-read` as a user runs them: killed, stopped, resumed, retried.

The hf engine on the tiny random model in fp32 greedy is deterministic, so a run
that was interrupted and resumed must write exactly what an uninterrupted run writes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pymupdf
import pytest

from ocr_app.batch.state import STATE_FILE

from .conftest import PROJECT_ROOT, SAMPLE_PDF

# One torch thread per run: the tiny model is fastest so, and test machines are shared.
ENV = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "OMP_NUM_THREADS": "1"}
# "çok uzun.pdf" keeps the run going long enough to be killed part way on a fast, idle machine.
GOOD = ["a.pdf", "fatura.pdf", "görüntü taraması.png", "uzun belge.pdf", "çok uzun.pdf", "alt klasör/şirket raporu.pdf"]
DUPLICATE = "alt klasör/a kopyası.pdf"  # same bytes as a.pdf
BAD = {"boş.pdf": "empty file", "bozuk.pdf": "corrupt PDF", "kayıp.pdf": "cannot read"}


def make_pdf(path: Path, pages: int) -> None:
    with pymupdf.open() as pdf:
        for number in range(1, pages + 1):
            page = pdf.new_page(width=300, height=400)
            page.insert_text((40, 40 + 12 * number), f"{path.stem}, sayfa {number}: İstanbul, çğıöşü", fontsize=14)
        pdf.save(path)


def make_samples(root: Path) -> Path:
    """Multi-page PDFs and an image, one corrupt, one empty, one dangling link, one duplicate, a symlink loop."""
    (root / "alt klasör").mkdir(parents=True)
    make_pdf(root / "a.pdf", 3)
    shutil.copy(SAMPLE_PDF, root / "fatura.pdf")
    make_pdf(root / "uzun belge.pdf", 6)
    make_pdf(root / "çok uzun.pdf", 40)
    make_pdf(root / "alt klasör" / "şirket raporu.pdf", 2)
    with pymupdf.open(root / "a.pdf") as pdf:
        pdf[1].get_pixmap(dpi=40).save(root / "görüntü taraması.png")
    shutil.copy(root / "a.pdf", root / DUPLICATE)
    (root / "boş.pdf").write_bytes(b"")
    (root / "bozuk.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 64)
    (root / "kayıp.pdf").symlink_to(root / "no such file.pdf")
    (root / "alt klasör" / "döngü").symlink_to(root, target_is_directory=True)
    return root


def ocr_read(args: list, model: Path | None) -> list[str]:
    """The command line; `--retry-failed` runs take no model options (they reuse the recorded ones)."""
    options = ["--model", str(model), "--engine", "hf", "--drafts", "0", "--dpi", "36", "--max-tokens", "24"] if model else []
    return [sys.executable, "-m", "ocr_app.cli.read", *map(str, args), *options]


def run(args: list, model: Path | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(ocr_read(args, model), cwd=PROJECT_ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def start(args: list, model: Path) -> subprocess.Popen:
    return subprocess.Popen(
        ocr_read(args, model), cwd=PROJECT_ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def query(output: Path, sql: str) -> list[tuple]:
    """Read the state store as a monitor would, while a run may be writing it."""
    if not (output / STATE_FILE).exists():
        return []
    with sqlite3.connect(f"file:{output / STATE_FILE}?mode=ro", uri=True, timeout=5) as db:
        try:
            return db.execute(sql).fetchall()
        except sqlite3.OperationalError:  # tables not created yet
            return []


def wait_for(process: subprocess.Popen, output: Path, sql: str, at_least: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        rows = query(output, sql)
        if rows and rows[0][0] >= at_least:
            return
        time.sleep(0.02)
    pytest.fail(f"the run ended or stalled before `{sql}` reached {at_least}: {process.communicate()[1][-2000:]}")


def outputs(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.startswith(".ocr-read-state")
    }


def page_events(log: Path) -> list[tuple[str, int, str]]:
    if not log.exists():
        return []
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    return [(event["source"], event["page"], event["status"]) for event in events]


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    return make_samples(tmp_path_factory.mktemp("batch") / "taramalar")


@pytest.fixture(scope="module")
def reference(samples, tiny_model_dir, tmp_path_factory) -> dict[str, bytes]:
    """What a run that is never interrupted writes."""
    output = tmp_path_factory.mktemp("reference") / "out"
    log = output.parent / "pages.jsonl"
    done = run([samples, "-o", output, "--log-json", log], tiny_model_dir)
    assert done.returncode == 1, done.stderr  # the bad inputs fail, the rest is written
    written = outputs(output)
    expected = {str(Path(name).with_suffix(".md")) for name in [*GOOD, DUPLICATE]}
    assert set(written) == expected
    events = page_events(log)
    assert len(events) == len(set(events)), "a page was read twice"
    assert not any(DUPLICATE in source for source, _, _ in events), "the duplicate was read"
    return written


def test_killed_run_resumes_without_losing_or_rereading_pages(samples, reference, tiny_model_dir, tmp_path):
    output, first_log, second_log = tmp_path / "out", tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    process = start([samples, "-o", output, "--log-json", first_log], tiny_model_dir)
    wait_for(process, output, "SELECT count(*) FROM documents WHERE status = 'done'", at_least=2)
    process.send_signal(signal.SIGKILL)
    process.communicate()

    assert query(output, "PRAGMA quick_check") == [("ok",)]
    done_at_kill = {row[0] for row in query(output, "SELECT source FROM documents WHERE status = 'done'")}
    pages_at_kill = set(query(output, "SELECT source, number FROM pages WHERE status = 'done'"))
    total_pages = sum(pymupdf.open(samples / name).page_count for name in GOOD)
    assert len(pages_at_kill) < total_pages, "the run finished before it could be killed; give it more pages"

    resumed = run([samples, "-o", output, "--log-json", second_log], tiny_model_dir)
    assert resumed.returncode == 1, resumed.stderr

    assert outputs(output) == reference
    assert query(output, "SELECT max(attempts) FROM pages") == [(1,)], "a page was recorded twice"
    read_again = {(source, number) for source, number, _ in page_events(second_log)}
    assert not read_again & pages_at_kill, "a page finished before the kill was read again"
    assert not {source for source, _ in read_again} & done_at_kill
    events = page_events(first_log) + page_events(second_log)
    assert not any(DUPLICATE in source for source, _, _ in events), "the duplicate was read"
    assert query(output, "SELECT status, duplicate_of FROM documents WHERE source LIKE '%kopyası.pdf'") == [
        ("duplicate", str(samples / "a.pdf"))
    ]
    failed = dict(query(output, "SELECT source, error FROM documents WHERE status = 'failed'"))
    assert {Path(source).name for source in failed} == set(BAD)
    for name, reason in BAD.items():
        assert reason in failed[str(samples / name)]
        assert name in resumed.stderr and reason in resumed.stderr  # the summary lists them
    # A plain rerun leaves failed documents alone; --retry-failed is for them.
    assert query(output, "SELECT max(attempts) FROM documents WHERE status = 'failed'") == [(1,)]


def test_sigterm_finishes_pages_in_flight_and_records_them(samples, reference, tiny_model_dir, tmp_path):
    output, log = tmp_path / "out", tmp_path / "pages.jsonl"
    process = start([samples, "-o", output, "--log-json", log], tiny_model_dir)
    wait_for(process, output, "SELECT count(*) FROM pages WHERE status = 'done'", at_least=2)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)

    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "SIGTERM" in stderr and "stopped early" in stderr
    assert query(output, "PRAGMA quick_check") == [("ok",)]
    recorded = set(query(output, "SELECT source, number FROM pages WHERE status = 'done'"))
    assert {(source, number) for source, number, _ in page_events(log)} == recorded  # nothing read went unrecorded
    assert query(output, "SELECT count(*) FROM documents WHERE status = 'pending'")[0][0] > 0
    assert not [path for path in output.rglob("*.part")]
    for name, text in outputs(output).items():  # whatever is written is complete
        assert text == reference[name]


def test_retry_failed_reads_only_the_failed_documents(tiny_model_dir, tmp_path):
    inputs, output, log = tmp_path / "girdi", tmp_path / "out", tmp_path / "retry.jsonl"
    inputs.mkdir()
    make_pdf(inputs / "iyi.pdf", 2)
    (inputs / "boş.pdf").write_bytes(b"")
    (inputs / "bozuk.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 64)
    first = run([inputs, "-o", output, "--format", "json"], tiny_model_dir)
    assert first.returncode == 1
    assert set(outputs(output)) == {"iyi.json"}

    make_pdf(inputs / "bozuk.pdf", 2)  # the user repairs one of the two
    retried = run(["--retry-failed", output, "--log-json", log])
    assert retried.returncode == 1, retried.stderr  # boş.pdf is still empty
    assert {Path(source).name for source, _, _ in page_events(log)} == {"bozuk.pdf"}
    assert set(outputs(output)) == {"iyi.json", "bozuk.json"}  # the recorded --format is kept
    assert "boş.pdf" in retried.stderr and "empty file" in retried.stderr
