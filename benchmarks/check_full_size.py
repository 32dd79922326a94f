"""The whole mission on the full-size (Qwen3.5-2B-shaped) checkpoints, on this machine: `make check-full-size`.

    python benchmarks/check_full_size.py [--tokens 32] [--only hf,vllm,server,train,eval]

Runs the real command lines one at a time (they each load a 4.5 GB model) and prints, per step, the
wall time, the peak RSS of its process tree (vLLM's engine process included), the time before the first
page started (load: imports, weights, rendering) and the seconds per output token.  Checks:
- `ocr-read` with the hf and vLLM engines, drafts 0 and 3: the predictable checkpoint's greedy text is
  identical between them (its logits have a wide margin); the random checkpoint's is reported (bf16
  logits of a random model nearly tie, so a batched verify may flip one: reported, not failed);
- `python -m vllm.entrypoints.openai.api_server` with the README's flags, then `ocr-read --server`;
- `ocr-train-mtp --max-steps 2` on synthetic pages; `ocr-eval tob` on two pages.
Pages use the check presets (configs/checks/: the real prompt, a 448x448-896x448 page budget, a
few dozen tokens): the real budget's ~2 350 visual tokens make every prefill minutes long on a CPU.
Exit status 1 when a step fails or the predictable text differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

from ocr_app.config import PROJECT_ROOT, load_model_preset
from ocr_app.engines.vllm import max_model_len

CHECKS = PROJECT_ROOT / "configs" / "checks"
PRESETS = {"predictable": CHECKS / "full-size-predictable.toml", "random": CHECKS / "full-size-random.toml"}
OUT = PROJECT_ROOT / "build" / "check-full-size"
PAGE = [str(PROJECT_ROOT / "samples" / "fatura.pdf"), "--pages", "1"]
PORT = 8123


@dataclass
class StepResult:
    name: str
    wall_s: float
    peak_rss_gib: float
    returncode: int
    tokens: int = 0
    decode_s: float = 0.0
    text: str | None = None

    def row(self) -> str:
        per_token = f"{self.decode_s / self.tokens:8.2f}" if self.tokens else "       -"
        load = f"{self.wall_s - self.decode_s:7.1f}" if self.tokens else "      -"
        status = "ok" if self.returncode == 0 else f"FAILED ({self.returncode})"
        return f"{self.name:<34} {self.wall_s:8.1f} {self.peak_rss_gib:8.2f} {load} {per_token}  {status}"


HEADER = f"{'step':<34} {'wall s':>8} {'peak GiB':>8} {'load s':>7} {'s/token':>8}  status"


def tree_rss(process: psutil.Process) -> int:
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for member in members:
        try:
            total += member.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def run(name: str, argv: list[str], log: Path, env: dict | None = None) -> StepResult:
    """Run one command to its end, sampling its process tree's RSS twice a second."""
    started = time.perf_counter()
    with log.open("w") as sink:
        child = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=PROJECT_ROOT, env={**os.environ, **(env or {})})
        watched, peak = psutil.Process(child.pid), 0
        while child.poll() is None:
            peak = max(peak, tree_rss(watched))
            time.sleep(0.5)
    return StepResult(name, time.perf_counter() - started, peak / 2**30, child.returncode)


def read_step(name: str, model: Path, drafts: int, tokens: int, extra: list[str]) -> StepResult:
    """`ocr-read` of one page with the JSON output; the page's tokens, decode time and text."""
    stem = name.replace(" ", "-").replace(",", "")
    output = OUT / f"{stem}.json"
    argv = [sys.executable, "-m", "ocr_app.cli.read", *PAGE, "--model", str(model), "--drafts", str(drafts),
            "--max-tokens", str(tokens), "--format", "json", "-o", str(output), *extra]
    result = run(name, argv, OUT / f"{stem}.log", {"OCR_APP_VLLM_EAGER": "1"})
    if result.returncode == 0:
        page = json.loads(output.read_text())["pages"][0]
        result.tokens, result.decode_s, result.text = page["metrics"]["output_tokens"], page["metrics"]["wall_s"], page["text"]
    print(result.row(), flush=True)
    return result


def compare(results: dict[str, StepResult], first: str, second: str, must_match: bool) -> bool:
    a, b = results.get(first), results.get(second)
    if a is None or b is None or a.text is None or b.text is None:
        return True  # a failed step is reported by its own row
    same = a.text == b.text
    common = next((i for i, (x, y) in enumerate(zip(a.text, b.text)) if x != y), min(len(a.text), len(b.text)))
    verdict = "identical" if same else f"differ after {common} characters"
    print(f"{first} vs {second}: {verdict}{'' if same or must_match else ' (random weights: near-tied bf16 logits)'}")
    return same or not must_match


def server_step(tokens: int) -> list[StepResult]:
    """The README's server command on the random checkpoint, its budget and length from the check preset."""
    preset = load_model_preset(PRESETS["random"])
    budget = preset.pixels
    server = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(preset.resolved_path()),
        "--host", "127.0.0.1", "--port", str(PORT), "--dtype", "bfloat16", "--no-enable-prefix-caching",
        "--max-model-len", str(max_model_len(preset)), "--limit-mm-per-prompt", '{"image": 1, "video": 0}',
        "--mm-processor-kwargs", json.dumps({"size": {"shortest_edge": budget.min_pixels, "longest_edge": budget.max_pixels}}),
        "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}',
        "--per-request-spec-decode-metrics", "summary", "--enforce-eager",
    ]
    started = time.perf_counter()
    log = (OUT / "server.log").open("w")
    process = subprocess.Popen(server, stdout=log, stderr=subprocess.STDOUT, cwd=PROJECT_ROOT)
    watched, peak, ready = psutil.Process(process.pid), 0, False
    try:
        while process.poll() is None and time.perf_counter() - started < 1800:
            peak = max(peak, tree_rss(watched))
            try:
                ready = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=2).status == 200
            except OSError:
                ready = False
            if ready:
                break
            time.sleep(2)
        start_s = time.perf_counter() - started
        print(f"server ready after {start_s:.0f} s (peak {peak / 2**30:.2f} GiB)" if ready else "server did not start: see server.log")
        if not ready:
            return [StepResult("vllm server start", start_s, peak / 2**30, 1)]
        read = read_step("ocr-read --server, drafts 3", PRESETS["random"], 3, tokens,
                         ["--engine", "vllm", "--server", f"http://127.0.0.1:{PORT}"])
        peak = max(peak, tree_rss(watched))
        return [StepResult("vllm server start", start_s, peak / 2**30, 0), read]
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--only", default="hf,vllm,server,train,eval")
    parser.add_argument("--checkpoints", default="predictable,random", help="whose reads: predictable, random")
    args = parser.parse_args()
    checkpoints = args.checkpoints.split(",")
    steps = set(args.only.split(","))
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.1f}, "
          f"{psutil.virtual_memory().available / 2**30:.1f} GiB available")
    print(HEADER, flush=True)
    results: dict[str, StepResult] = {}
    ok = True
    for engine in ("hf", "vllm"):
        if engine not in steps:
            continue
        for name in checkpoints:
            for drafts in (0, 3):
                step = f"{engine} {name} drafts {drafts}"
                results[step] = read_step(step, PRESETS[name], drafts, args.tokens, ["--engine", engine])
            ok &= compare(results, f"{engine} {name} drafts 0", f"{engine} {name} drafts 3", must_match=name == "predictable")
    if "server" in steps:
        for result in server_step(args.tokens):
            results[result.name] = result
    if "train" in steps:
        train = [sys.executable, "-m", "ocr_app.cli.train_mtp", "--model", str(PRESETS["random"]), "--synth-pages", "3",
                 "--output", str(OUT / "trained-head"), "--work-dir", str(OUT / "train-work"), "--max-steps", "2",
                 "--batch-size", "1", "--grad-accum", "1", "--eval-pages", "1", "--max-tokens", str(args.tokens),
                 "--device", "cpu", "--threads", str(os.cpu_count())]
        results["train"] = run("ocr-train-mtp --max-steps 2", train, OUT / "train.log")
        print(results["train"].row(), flush=True)
    if "eval" in steps:
        evaluate = [sys.executable, "-m", "ocr_app.cli.eval", "tob", str(PROJECT_ROOT / "samples" / "tob-mini"),
                    "--model", str(PRESETS["random"]), "--drafts", "0", "--limit", "2", "--max-tokens", str(args.tokens),
                    "-o", str(OUT / "eval")]
        results["eval"] = run("ocr-eval tob, 2 pages", evaluate, OUT / "eval.log")
        print(results["eval"].row(), flush=True)
    failed = [r.name for r in results.values() if r.returncode != 0]
    print("\n" + HEADER)
    for result in results.values():
        print(result.row())
    if failed or not ok:
        print(f"FAILED: {', '.join(failed) or 'predictable text differs between drafts 0 and 3'} (logs in {OUT})")
        sys.exit(1)


if __name__ == "__main__":
    main()
