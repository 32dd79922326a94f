"""The whole mission on the full-size (Qwen3.5-2B-shaped) checkpoints, on this machine: `make check-full-size`.

    python benchmarks/check_full_size.py [--tokens 32] [--steps hf,vllm,server,train,eval]
                                         [--checkpoints predictable[,random]]

Runs the real command lines one at a time (they each load a 4.5-5.6 GB model) and prints, per step, the
wall time, the load time (wall minus the page's own time: imports, weights, rendering), the seconds per
output token, the peak RSS and the peak anonymous memory of its process tree (vLLM's engine core runs in
a child process), the drafts accepted, and the 1-minute load average while it ran.  Checks:
- `ocr-read` with the hf and vLLM engines, drafts 0 and 3, on the predictable checkpoint by default: its
  greedy text must be identical between them (its logits have a wide margin) and its head drafts exactly
  what the model says, so every draft is accepted.  `--checkpoints predictable,random` adds the random
  checkpoint, whose difference is reported, not failed (bf16 logits of a random model nearly tie, so a
  batched verify may flip one);
- the README's server command (`serve_command`, the line the README shows), then `ocr-read --server`;
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
from ocr_app.engines.remote import serve_command
from ocr_app.engines.vllm import CPU_KV_CACHE_ENV, EAGER_ENV
from ocr_app.metrics import PageMetrics

CHECKS = PROJECT_ROOT / "configs" / "checks"
PRESETS = {"predictable": CHECKS / "full-size-predictable.toml", "random": CHECKS / "full-size-random.toml"}
STEPS = ("hf", "vllm", "server", "train", "eval")
OUT = PROJECT_ROOT / "build" / "check-full-size"
PAGE = [str(PROJECT_ROOT / "samples" / "fatura.pdf"), "--pages", "1"]
PORT = 8123
DRAFTS = 3
GIB = 2**30
# The vLLM steps: eager (no torch.compile wait), and a 1 GiB KV cache.  vLLM's CPU backend allocates its
# whole KV cache at start; the engine's own default (a quarter of the free memory, up to 8 GiB) on top of
# the model and, with drafts, the drafter's embed/lm_head (11.7 and 15.6 GiB anonymous with 1 GiB of
# cache, docs/full-size.md) would not fit this 24 GiB machine beside other jobs.  One check page needs
# ~1 000 tokens of cache: ~12 MiB in the 6 full-attention layers, plus one sequence's linear-attention
# state.  Only the CPU backend reads the variable.
VLLM_ENV = {EAGER_ENV: "1", CPU_KV_CACHE_ENV: "1"}


class TreeMemory:
    """Peak resident and anonymous memory of a process and all its descendants, over `sample()` calls.

    Anonymous memory (RssAnon: the heap, tensors copied out of the file) is what the machine must find
    room for.  RSS also counts the safetensors shards mmapped from the page cache, which the kernel
    drops and rereads under pressure, so RSS overstates what a step needs.
    """

    def __init__(self, pid: int):
        self.root = psutil.Process(pid)
        self.peak_rss = self.peak_anon = 0
        self.loads: list[float] = []

    def sample(self) -> None:
        try:
            members = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        rss = anon = 0
        for member in members:
            try:
                info = member.memory_info()
            except psutil.NoSuchProcess:
                continue
            rss += info.rss
            anon += info.rss - info.shared  # Linux statm: shared = RssFile + RssShmem, so this is RssAnon
        self.peak_rss, self.peak_anon = max(self.peak_rss, rss), max(self.peak_anon, anon)
        self.loads.append(os.getloadavg()[0])

    @property
    def mean_load(self) -> float:
        return sum(self.loads) / len(self.loads) if self.loads else os.getloadavg()[0]


@dataclass
class StepResult:
    name: str
    wall_s: float
    returncode: int
    peak_rss_gib: float = 0.0
    peak_anon_gib: float = 0.0
    load_average: float = 0.0
    page: PageMetrics | None = None
    text: str | None = None

    @classmethod
    def measured(cls, name: str, wall_s: float, returncode: int, memory: TreeMemory) -> StepResult:
        return cls(name, wall_s, returncode, memory.peak_rss / GIB, memory.peak_anon / GIB, memory.mean_load)

    def row(self) -> str:
        tokens = self.page.output_tokens if self.page is not None else 0
        per_token = f"{self.page.wall_s / tokens:8.2f}" if tokens else f"{'-':>8}"
        load = f"{self.wall_s - self.page.wall_s:7.1f}" if self.page is not None else f"{'-':>7}"
        spec = self.page.spec if self.page is not None else None
        accepted = f"{spec.num_accepted_tokens}/{spec.num_draft_tokens}" if spec is not None else "-"
        status = "ok" if self.returncode == 0 else f"FAILED ({self.returncode})"
        return (f"{self.name:<32} {self.wall_s:7.1f} {load} {per_token} {self.peak_rss_gib:7.2f} {self.peak_anon_gib:7.2f}"
                f" {accepted:>9} {self.load_average:7.1f}  {status}")


HEADER = f"{'step':<32} {'wall s':>7} {'load s':>7} {'s/token':>8} {'RSS GiB':>7} {'anon':>7} {'accepted':>9} {'loadavg':>7}  status"


def run(name: str, argv: list[str], log: Path, env: dict | None = None) -> StepResult:
    """Run one command to its end, sampling its process tree's memory twice a second."""
    started = time.perf_counter()
    with log.open("w") as sink:
        child = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=PROJECT_ROOT, env={**os.environ, **(env or {})})
        memory = TreeMemory(child.pid)
        while child.poll() is None:
            memory.sample()
            time.sleep(0.5)
    return StepResult.measured(name, time.perf_counter() - started, child.returncode, memory)


def read_step(name: str, model: Path, drafts: int, tokens: int, extra: list[str], env: dict | None = None) -> StepResult:
    """`ocr-read` of one page with the JSON output; the page's metrics and text."""
    stem = name.replace(" ", "-").replace(",", "")
    output = OUT / f"{stem}.json"
    argv = [sys.executable, "-m", "ocr_app.cli.read", *PAGE, "--model", str(model), "--drafts", str(drafts),
            "--max-tokens", str(tokens), "--format", "json", "-o", str(output), *extra]
    result = run(name, argv, OUT / f"{stem}.log", env)
    if result.returncode == 0:
        page = json.loads(output.read_text())["pages"][0]
        result.page, result.text = PageMetrics.from_dict(page["metrics"]), page["text"]
    print(result.row(), flush=True)
    return result


def compare(first: StepResult, second: StepResult, must_match: bool) -> bool:
    """Whether two reads of the same page gave the same text; a failed read is reported by its own row."""
    if first.text is None or second.text is None:
        return True
    a, b = first.text, second.text
    same = a == b
    common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    verdict = "identical text" if same else f"text differs after {common} characters"
    print(f"{first.name} vs {second.name}: {verdict}{'' if same or must_match else ' (random weights: near-tied bf16 logits)'}",
          flush=True)
    return same or not must_match


def server_step(model: Path, tokens: int) -> list[StepResult]:
    """The README's server command (`serve_command`) for a check preset, then `ocr-read --server` against it."""
    argv = [*serve_command(load_model_preset(model), DRAFTS, port=PORT), "--enforce-eager"]
    started = time.perf_counter()
    with (OUT / "server.log").open("w") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=PROJECT_ROOT,
                                   env={**os.environ, CPU_KV_CACHE_ENV: VLLM_ENV[CPU_KV_CACHE_ENV]})
        memory, ready = TreeMemory(process.pid), False
        try:
            while process.poll() is None and time.perf_counter() - started < 1800:
                memory.sample()
                try:
                    ready = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=2).status == 200
                except OSError:
                    ready = False
                if ready:
                    break
                time.sleep(2)
            start = StepResult.measured("vllm serve start", time.perf_counter() - started, 0 if ready else 1, memory)
            print(start.row(), flush=True)
            if not ready:
                print(f"server did not start: see {OUT / 'server.log'}")
                return [start]
            read = read_step(f"ocr-read --server, drafts {DRAFTS}", model, DRAFTS, tokens,
                             ["--engine", "vllm", "--server", f"http://127.0.0.1:{PORT}"])
            return [start, read]
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=32, help="tokens per page (each costs seconds on a CPU)")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"which of {','.join(STEPS)}")
    parser.add_argument("--checkpoints", default="predictable",
                        help="whose reads: predictable (text must match, drafts all accepted), random (reported)")
    args = parser.parse_args()
    checkpoints, steps = args.checkpoints.split(","), args.steps.split(",")
    if unknown := [name for name in checkpoints if name not in PRESETS] + [step for step in steps if step not in STEPS]:
        parser.error(f"unknown step or checkpoint: {', '.join(unknown)}")
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.1f}, "
          f"{psutil.virtual_memory().available / GIB:.1f} GiB available; logs in {OUT}")
    print(HEADER, flush=True)
    results: list[StepResult] = []
    same = True
    for engine in ("hf", "vllm"):
        if engine not in steps:
            continue
        env = VLLM_ENV if engine == "vllm" else None
        for name in checkpoints:
            pair = [read_step(f"{engine} {name} drafts {drafts}", PRESETS[name], drafts, args.tokens, ["--engine", engine], env)
                    for drafts in (0, DRAFTS)]
            same &= compare(*pair, must_match=name == "predictable")
            results += pair
    if "server" in steps:
        # The random checkpoint's tied lm_head is the real model's layout; its text is not compared.
        results += server_step(PRESETS["random"], args.tokens)
    if "train" in steps:
        train = [sys.executable, "-m", "ocr_app.cli.train_mtp", "--model", str(PRESETS["random"]), "--synth-pages", "3",
                 "--output", str(OUT / "trained-head"), "--work-dir", str(OUT / "train-work"), "--max-steps", "2",
                 "--batch-size", "1", "--grad-accum", "1", "--eval-pages", "1", "--max-tokens", str(args.tokens),
                 "--device", "cpu", "--threads", str(os.cpu_count())]
        results.append(run("ocr-train-mtp --max-steps 2", train, OUT / "train.log"))
        print(results[-1].row(), flush=True)
    if "eval" in steps:
        evaluate = [sys.executable, "-m", "ocr_app.cli.eval", "tob", str(PROJECT_ROOT / "samples" / "tob-mini"),
                    "--model", str(PRESETS["random"]), "--drafts", "0", "--limit", "2", "--max-tokens", str(args.tokens),
                    "-o", str(OUT / "eval")]
        results.append(run("ocr-eval tob, 2 pages", evaluate, OUT / "eval.log"))
        print(results[-1].row(), flush=True)
    failed = [result.name for result in results if result.returncode != 0]
    print("\n" + HEADER)
    for result in results:
        print(result.row())
    if failed or not same:
        print(f"FAILED: {', '.join(failed) or 'predictable text differs between drafts 0 and 3'} (logs in {OUT})")
        sys.exit(1)


if __name__ == "__main__":
    main()
