"""Memory of one `ocr-train-mtp` micro-batch at Qwen3.5-2B's size, by the number of draft chains (bases).

    python benchmarks/train_mtp_memory.py [--bases 128,256] [--steps 3]

The head's loss materialises vocabulary-sized rows ([bases, 248 320] per draft step: the student's and
the teacher's logits, their log-softmaxes, the KL's terms), so its memory grows with pages per micro-batch
x `max_bases` x draft steps, not with the model.  This builds the real head, embedding and lm_head (the
main model's decoder is cut to 4 layers: the loss never runs it), feeds `distill` one page of synthetic
teacher states with that many bases, runs forward and backward under the training loop's bf16 autocast,
and prints the bytes autograd keeps for backward (exact: every saved tensor's storage, counted once),
the process's peak RSS growth, and both per base, extrapolated to the defaults (4 pages x 512 bases).
"""

from __future__ import annotations

import argparse
import threading
import time

import psutil
import torch
from transformers import Qwen3_5ForConditionalGeneration

from ocr_app.testing.full_size import full_size_config
from ocr_app.train_mtp.config import load_train_config
from ocr_app.train_mtp.distill import distill, make_batch
from ocr_app.train_mtp.head_init import fresh_head
from ocr_app.train_mtp.loop import autocast
from ocr_app.train_mtp.teacher import TeacherPass

PROMPT = 16  # prompt positions of the synthetic page: the loss only looks at output positions


class PeakRss:
    """Highest RSS of this process while the block runs, sampled every 5 ms."""

    def __enter__(self):
        self.process, self.peak, self.running = psutil.Process(), 0, True
        self.base = self.process.memory_info().rss
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()

    @property
    def growth(self) -> int:
        return self.peak - self.base


def reduced_main_model() -> Qwen3_5ForConditionalGeneration:
    config = full_size_config()
    config.text_config.num_hidden_layers = 4
    config.text_config.layer_types = config.text_config.layer_types[:4]
    config.vision_config.depth = 1
    return Qwen3_5ForConditionalGeneration._from_config(config, dtype=torch.bfloat16).eval()


def measure(head, bases: int, steps: int, weights: list[float], temperature: float, ce_weight: float) -> tuple[int, int]:
    hidden = head.fc.weight.shape[0]
    length = PROMPT + bases + steps + 1
    generator = torch.Generator().manual_seed(0)
    page = TeacherPass(
        embeds=torch.randn(length, hidden, generator=generator, dtype=torch.bfloat16) * 0.02,
        hidden=torch.randn(length, hidden, generator=generator, dtype=torch.bfloat16),
        positions=torch.arange(length).expand(3, -1).clone(),
        prompt_len=PROMPT,
    )
    batch = make_batch([page], bases, None, torch.float32)
    storages: dict[int, int] = {}

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    head.zero_grad(set_to_none=True)
    with PeakRss() as rss:
        with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
            with autocast(torch.device("cpu"), torch.bfloat16):
                outcome = distill(head, batch, weights, temperature, ce_weight)
        outcome.loss.backward()
    return sum(storages.values()), rss.growth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bases", default="128,256", help="draft chains in the micro-batch (pages x max_bases)")
    parser.add_argument("--steps", type=int, default=None, help="draft steps (default: configs/train_mtp.toml)")
    args = parser.parse_args()
    config = load_train_config(**({"draft_steps": args.steps} if args.steps else {}))
    model = reduced_main_model()
    head = fresh_head(model, seed=0).to(torch.float32).train()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    vocab = model.config.text_config.vocab_size
    default_bases = config.batch_size * config.max_bases
    print(f"vocab {vocab}, {config.draft_steps} draft steps, bf16 autocast, {torch.get_num_threads()} threads")
    print(f"{'bases':>6} {'saved for backward':>19} {'peak RSS growth':>16}")
    points = []
    for bases in sorted(int(b) for b in args.bases.split(",")):
        saved, peak = measure(head, bases, config.draft_steps, config.weights(), config.temperature, config.ce_weight)
        points.append((bases, saved, peak))
        print(f"{bases:>6} {saved / 2**30:>15.2f} GiB {peak / 2**30:>12.2f} GiB", flush=True)
    if len(points) < 2:
        return
    # Linear in bases: a fixed part (the bf16 lm_head/embedding autograd keeps, the head) plus a slope.
    (b0, s0, p0), (b1, s1, p1) = points[0], points[-1]
    saved_slope, peak_slope = (s1 - s0) / (b1 - b0), (p1 - p0) / (b1 - b0)
    at_defaults = lambda first, slope: (first + slope * (default_bases - b0)) / 2**30  # noqa: E731
    print(f"per base: {saved_slope / 2**20:.2f} MiB saved, {peak_slope / 2**20:.2f} MiB peak "
          f"({saved_slope / config.draft_steps / (vocab * 4):.1f} fp32 vocabulary rows per draft step)")
    print(f"at the defaults ({config.batch_size} pages x {config.max_bases} bases = {default_bases}): "
          f"~{at_defaults(s0, saved_slope):.1f} GiB saved for backward, ~{at_defaults(p0, peak_slope):.1f} GiB peak growth")


if __name__ == "__main__":
    main()
