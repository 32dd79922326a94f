"""`ocr-read DIR -o OUT --ray ADDRESS` on a real two-node Ray cluster started here, read with the shipped model.

The head and a worker node are separate `ray start --block` processes (own temp dir, free ports); the
worker node is killed with SIGKILL, every process of it at once, in the middle of a run.  The hf engine
in fp32 greedy reads a page the same wherever it runs, so every run must write exactly what plain
`ocr-read` writes on the same folder.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from PIL import Image

from ocr_app.batch.ray_run import LOCAL, RayCluster
from ocr_app.batch.state import STATE_FILE
from ocr_app.cli.read import with_ray_address
from ocr_app.config import load_ray_preset
from ocr_app.errors import ConfigError

from .conftest import PROJECT_ROOT, SAMPLE_PDF

pytest.importorskip("ray", reason="the cluster extra (pip install -e '.[cluster]') is not installed")

RAY = Path(sys.executable).parent / "ray"
TOB_MINI = PROJECT_ROOT / "samples" / "tob-mini"
# One torch thread, as a one-CPU replica has: the same arithmetic, so the same greedy tokens.
ENV = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "OMP_NUM_THREADS": "1"}
# A few tokens per band keep the runs short; every band of every page is still read.
READ = ["--engine", "hf", "--max-tokens", "8"]
ON_CLUSTER = ["--replicas", "2", "--batch-size", "1"]


def test_ray_without_an_address_is_a_local_instance_and_a_bad_address_is_refused():
    assert with_ray_address(["scans", "-o", "out", "--ray"]) == ["scans", "-o", "out", "--ray", LOCAL]
    assert with_ray_address(["--ray", "scans", "-o", "out"]) == ["--ray", LOCAL, "scans", "-o", "out"]
    assert with_ray_address(["scans", "--ray", "auto"]) == ["scans", "--ray", "auto"]
    assert with_ray_address(["scans", "--ray", "10.0.0.5:6379"]) == ["scans", "--ray", "10.0.0.5:6379"]
    with pytest.raises(ConfigError, match="not a Ray address"):
        RayCluster("http://head", load_ray_preset())
    with pytest.raises(ConfigError, match="replicas"):
        load_ray_preset(replicas=0)


def make_documents(root: Path) -> Path:
    """The sample invoice (2 pages), a 2-page TIFF of the tops of two tob-mini pages, a receipt and its copy,
    and a corrupt PDF."""
    root.mkdir()
    shutil.copy(SAMPLE_PDF, root / "fatura.pdf")
    shutil.copy(TOB_MINI / "receipt" / "receipt-01.jpg", root / "fiş.jpg")
    shutil.copy(TOB_MINI / "receipt" / "receipt-01.jpg", root / "fiş kopyası.jpg")
    tops = [Image.open(TOB_MINI / kind / f"{kind}-01.jpg").convert("RGB").crop((0, 0, 880, 300)) for kind in ("invoice", "letter")]
    tops[0].save(root / "iki sayfa.tiff", save_all=True, append_images=tops[1:])
    (root / "bozuk.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 64)
    return root


def ocr_read(folder: Path, output: Path, *options: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.read", str(folder), "-o", str(output), *READ, *options],
        cwd=PROJECT_ROOT, env=ENV, capture_output=True, text=True, timeout=600,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def outputs(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.startswith(".ocr-read-state")
    }


def summary_count(stderr: str, row: str) -> int:
    return int(re.search(rf"{row}\s*│\s*(\d+)", stderr).group(1))


def failures(output: Path) -> dict[str, str]:
    with sqlite3.connect(output / STATE_FILE) as db:
        rows = db.execute("SELECT source, error FROM documents WHERE status = 'failed'").fetchall()
    return {Path(source).name: error for source, error in rows}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Node:
    """One `ray start --block`: it stays in the foreground, and its processes are its descendants."""

    def __init__(self, log: Path, cpus: int, *options: str):
        self.log = log
        ports = ("--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port")
        command = [str(RAY), "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus),
                   "--object-store-memory", str(100 * 2**20), "--disable-usage-stats", *options]
        for port in ports:
            command += [port, str(free_port())]
        with log.open("w") as handle:
            self.process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=ENV, start_new_session=True)

    def wait_started(self) -> None:
        deadline = time.monotonic() + 120
        while "will now block" not in self.log.read_text():
            assert self.process.poll() is None and time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.2)

    def processes(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def kill(self) -> None:
        """kill -9 of every process of the node at once, as when its machine dies."""
        for process in self.processes():
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # `ray start --block` stops its processes on SIGTERM
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Cluster:
    address: str
    head: Node
    worker: Node


@pytest.fixture(scope="module")
def cluster():
    """A head and a worker node on this machine, with a token of their own (Ray's token authentication, which
    `ocr-read --ray` meets as on any cluster); a short temp dir (Ray's socket paths are limited to ~100
    characters).  The head alone holds the run once the worker node is gone: two replicas and a render task."""
    temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    (temp / "token").write_text(secrets.token_hex(32))
    ENV.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(temp / "token"))
    port = free_port()
    head = Node(temp / "head.log", 3, "--head", "--port", str(port), "--temp-dir", str(temp), "--include-dashboard", "false",
                "--dashboard-port", str(free_port()), "--ray-client-server-port", str(free_port()))
    nodes = [head]
    try:
        head.wait_started()
        worker = Node(temp / "worker.log", 2, "--address", f"127.0.0.1:{port}")
        nodes.append(worker)
        worker.wait_started()
        yield Cluster(f"127.0.0.1:{port}", head, worker)
    finally:
        for node in reversed(nodes):
            node.stop()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> Path:
    return make_documents(tmp_path_factory.mktemp("ray") / "belgeler")


@pytest.fixture(scope="module")
def reference(documents, tmp_path_factory) -> Path:
    """Plain `ocr-read` (bulk, an engine in its own process) on the same folder."""
    output = tmp_path_factory.mktemp("plain") / "out"
    done = ocr_read(documents, output)
    assert done.returncode == 1 and summary_count(done.stderr, "documents done") == 3, done.stderr
    return output


def test_a_cluster_run_writes_what_ocr_read_writes_and_a_rerun_skips_it(cluster, documents, reference, tmp_path):
    output = tmp_path / "out"
    done = ocr_read(documents, output, "--ray", cluster.address, *ON_CLUSTER)
    assert done.returncode == 1, done.stderr  # the corrupt PDF, as in the plain run
    assert outputs(output) == outputs(reference)
    assert failures(output) == failures(reference) and "corrupt PDF" in failures(output)["bozuk.pdf"]
    assert summary_count(done.stderr, "documents done") == 3 and summary_count(done.stderr, "duplicates copied") == 1
    assert re.search(r"replicas \(pages each\)\s*│\s*2 \(\d+, \d+\)", done.stderr), done.stderr

    again = ocr_read(documents, output, "--ray", cluster.address, *ON_CLUSTER)
    assert summary_count(again.stderr, "skipped \\(done before\\)") == 4 and summary_count(again.stderr, "pages read") == 0
    assert outputs(output) == outputs(reference)


def test_a_worker_node_killed_mid_run_costs_only_its_pages_in_flight(cluster, documents, reference, tmp_path):
    output = tmp_path / "out"
    command = [sys.executable, "-m", "ocr_app.cli.read", str(documents), "-o", str(output), *READ,
               "--ray", cluster.address, *ON_CLUSTER]
    run = subprocess.Popen(command, cwd=PROJECT_ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not _reading_on(cluster.worker):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1][-3000:]
            time.sleep(0.1)
        cluster.worker.kill()  # with a page in flight on it
        assert run.poll() is None, "the run ended before the worker node was killed"
        _, stderr = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
    assert "Traceback" not in stderr, stderr
    assert run.returncode == 1, stderr
    assert outputs(output) == outputs(reference)
    assert failures(output) == failures(reference)
    assert summary_count(stderr, "documents done") == 3 and summary_count(stderr, "duplicates copied") == 1
    assert not list(output.rglob("*.part"))


def _reading_on(node: Node) -> bool:
    """A replica on the node is in the middle of a batch (Ray titles an actor's process by the call it runs)."""
    for process in node.processes():
        try:
            if "PageReader)).submit" in " ".join(process.cmdline()):
                return True
        except psutil.NoSuchProcess:
            continue
    return False
