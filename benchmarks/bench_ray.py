"""Pages/s of a folder read on Ray (1 and 2 replicas) against plain `ocr-read` bulk, on this machine.

    python benchmarks/bench_ray.py [--pages 8] [--max-tokens 8] [--cpus 2]

The folder: the tops (160 px: a heading and a line or two) of the first N tob-mini pages, distinct
images read with the shipped model (hf engine, bulk mode, greedy).  Ray runs on a head node started here (`ray start --head
--block`, a temp dir of its own, free ports, stopped at the end) with `--cpus` logical CPUs for the
replicas plus one for the render task: one replica of all of them (the same torch threads as plain
`ocr-read`: the Ray path's overhead), then that many replicas of one CPU each.  Each run is timed end
to end (process start to exit: model loading, Ray's start of the replicas), and its own summary's
pages/s (reading only) is printed beside it.  Other work on the machine skews every figure: the load
average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TOB_MINI = PROJECT_ROOT / "samples" / "tob-mini"
RAY = Path(sys.executable).parent / "ray"


def make_folder(root: Path, pages: int) -> Path:
    images = sorted(TOB_MINI.glob("*/*.jpg"))[:pages]
    root.mkdir(parents=True)
    for image in images:
        Image.open(image).convert("RGB").crop((0, 0, 880, 160)).save(root / f"{image.stem}.png")
    return root


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_head(temp: Path, cpus: int, env: dict) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [
        str(RAY), "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(port),
        "--num-cpus", str(cpus), "--object-store-memory", str(200 * 2**20), "--disable-usage-stats",
        "--include-dashboard", "false", "--temp-dir", str(temp), "--dashboard-port", str(free_port()),
        "--ray-client-server-port", str(free_port()), "--dashboard-agent-listen-port", str(free_port()),
        "--dashboard-agent-grpc-port", str(free_port()), "--metrics-export-port", str(free_port()),
        "--runtime-env-agent-port", str(free_port()),
    ]
    log = temp / "head.log"
    with log.open("w") as handle:
        head = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    while "will now block" not in log.read_text():
        if head.poll() is not None:
            sys.exit(f"the Ray head did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.5)
    return head, f"127.0.0.1:{port}"


def read(folder: Path, output: Path, options: list[str], env: dict) -> tuple[float, float, str]:
    command = [sys.executable, "-m", "ocr_app.cli.read", str(folder), "-o", str(output), *options]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    reading = float(re.search(r"pages/s\s*│\s*([\d.]+)", done.stderr).group(1))
    return wall, reading, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()

    temp = Path(tempfile.mkdtemp(prefix="rayb", dir="/tmp"))  # short: Ray's socket paths are limited
    (temp / "token").write_text(secrets.token_hex(32))
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(temp / "token")}
    folder = make_folder(temp / "pages", args.pages)
    common = ["--engine", "hf", "--max-tokens", str(args.max_tokens)]
    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {args.pages} pages, max tokens {args.max_tokens}, {args.cpus} CPUs; "
          f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    head, address = start_head(temp, args.cpus + 1, env)
    try:
        runs = {
            "plain ocr-read (bulk)": common,
            f"--ray, 1 replica x {args.cpus} CPUs": [*common, "--ray", address, "--replicas", "1", "--cpus-per-replica", str(args.cpus)],
            f"--ray, {args.cpus} replicas x 1 CPU": [*common, "--ray", address, "--replicas", str(args.cpus), "--cpus-per-replica", "1"],
        }
        results = {}
        outputs = {}
        for name, options in runs.items():
            output = temp / f"out-{len(results)}"
            results[name] = read(folder, output, options, env)
            outputs[name] = {path.name: path.read_bytes() for path in sorted(output.glob("*.md"))}
            wall, reading, _ = results[name]
            print(f"{name:32s} {wall:7.1f} s end to end  {args.pages / wall:6.3f} pages/s  "
                  f"(reading {reading:.3f} pages/s)  load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        head.terminate()
        head.wait(timeout=60)
        shutil.rmtree(temp, ignore_errors=True)
    names = list(results)
    plain, one = results[names[0]][0], results[names[1]][0]
    print(f"Ray path at one replica: {100 * (one - plain) / plain:+.1f}% end-to-end time against plain ocr-read")
    same = all(outputs[name] == outputs[names[0]] for name in names)
    print(f"outputs identical to plain ocr-read: {same}")


if __name__ == "__main__":
    main()
