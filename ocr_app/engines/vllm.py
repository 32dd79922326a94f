"""The vLLM engine: the model in-process through vLLM's Python API, MTP head as drafter.

With K drafts the MTP head proposes K tokens per round and the main model
verifies them (`speculative_config={"method": "mtp", ...}`); with K = 0 no
speculative config is given at all.  K is fixed when vLLM starts, so the
engine is started for one K and restarted only if a read asks for another.
drafts "auto" is resolved to one K before the start, from the preset's
`[auto_drafts]` acceptance and recorded costs (`speculative.auto.fixed_choice`).

One `LLMEngine` is driven step by step: `read` runs one request and hands the
new text to `on_text` after every step (low latency); `read_many` keeps up to
`concurrency` requests inside vLLM's continuous batching and yields each page
as it finishes (bulk).

Speculative-decoding figures come from vLLM's own counters: per request from
`per_request_spec_decode_metrics="summary"`, per engine from `get_metrics()`.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import psutil
from PIL import Image

from ocr_app.checkpoint import HeadReport, inspect_mtp_head
from ocr_app.config import ModelPreset
from ocr_app.engines.protocol import AUTO_DRAFTS, Drafts, GenerationSettings, Key, PageText, TextCallback
from ocr_app.engines import vllm_loop_ban
from ocr_app.engines.spec_counters import from_acceptance_histogram, from_engine_metrics
from ocr_app.errors import ModelError
from ocr_app.metrics import PageMetrics, SpecDecodingStats
from ocr_app.prompts import render_page_prompt
from ocr_app.speculative.auto import AutoDraftsReport, fixed_choice

log = logging.getLogger(__name__)

STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")
# Room for the chat template and instruction around the image tokens.
PROMPT_TEXT_TOKENS = 512
# `OCR_APP_VLLM_EAGER=1` skips torch.compile, `=0` asks for it; unset: eager on CPU, compiled on GPU (`eager_default`).
EAGER_ENV = "OCR_APP_VLLM_EAGER"
# vLLM's CPU backend wants 92% of the machine's memory free at start unless its KV cache has an explicit
# size, so any other process (a browser, a training run) made it refuse to start.
CPU_KV_CACHE_ENV = "VLLM_CPU_KVCACHE_SPACE"


def default_cpu_kv_cache_gib(available_bytes: int) -> int:
    """A quarter of the memory free now, 1-8 GiB: room for many pages in flight, and for everything else."""
    return max(1, min(8, available_bytes // 4 // 2**30))


def check_model_folder(model_dir: Path, drafts: int) -> HeadReport:
    """Refuse a folder whose MTP head vLLM would not load, before spending a minute starting it.

    vLLM skips safetensors files its index does not list, and a head that did
    not load drafts at ~0% acceptance instead of failing.  Without drafts the
    head is not needed, so the problem is only noted.
    """
    if not (model_dir / "config.json").exists():
        raise ModelError(f"model folder {model_dir} not found or has no config.json")
    from transformers import AutoConfig

    try:
        text_config = AutoConfig.from_pretrained(model_dir).get_text_config()
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read the model config in {model_dir}: {str(exc).splitlines()[0]}") from None
    report = inspect_mtp_head(model_dir, text_config)
    if not report.usable:
        if drafts > 0:
            raise ModelError(f"{report.message}; cannot draft with it (--drafts 0 reads without the head)")
        log.warning("note: %s; reading without drafts", report.message)
    return report


def max_model_len(model: ModelPreset) -> int:
    """Longest sequence a page needs: its image tokens, the prompt text, and the answer."""
    image_tokens = model.pixels.max_pixels // (model.pixels.factor * model.pixels.factor)
    return image_tokens + PROMPT_TEXT_TOKENS + model.max_tokens


def page_spec_stats(completion, drafts: int) -> SpecDecodingStats | None:
    """A request's counters as vLLM kept them; a page with no verify round has empty ones."""
    if not drafts:
        return None
    counters = completion.spec_decode_metrics
    if counters is None:
        return SpecDecodingStats()
    return from_acceptance_histogram(counters.histogram, counters.num_draft_tokens)


def top2_gaps(logprobs) -> tuple[float, ...] | None:
    """Per output token, the top-2 log-prob gap from vLLM's `logprobs=2` answer (None if not asked)."""
    if logprobs is None:
        return None
    gaps = []
    for position in logprobs:  # {token id: Logprob}: the top 2 by rank, and the chosen token
        by_rank = {entry.rank: entry.logprob for entry in position.values()}
        gaps.append(by_rank[1] - by_rank[2])
    return tuple(gaps)


def eager_default(cuda: bool) -> bool:
    """Whether vLLM runs eager when the caller does not say: `OCR_APP_VLLM_EAGER` if set, else eager on a CPU.

    On this CPU torch.compile bought nothing (6 real pages, 32 in flight, ocr-tiny-tr, 2026-12-03: 0.529 and
    0.541 pages/s compiled, 0.582 and 0.415 eager, docs/speed.md) and cost ~17 s of start; and its tracing
    can meet the garbage collector freeing vllm-cpu's oneDNN GEMM handlers, whose `__del__` reads a tensor
    inside fake-tensor mode: an ignored exception, or (one `ocr-eval` run of two) a fatal stack overflow
    that killed the engine.  On a GPU compilation and CUDA graphs are where vLLM's speed comes from."""
    value = os.environ.get(EAGER_ENV)
    if value in ("0", "1"):
        return value == "1"
    return not cuda


class VllmEngine:
    name = "vllm"

    def __init__(self, model: ModelPreset, drafts: Drafts = 0, enforce_eager: bool | None = None):
        self.preset = model
        # `ban_loops` rides on vLLM's bad words, which it applies at every verified draft position
        # (`vllm_loop_ban`); without that plugin a looping page is re-read sampled (`ocr_app.repetition`).
        self.bans_loops = vllm_loop_ban.installed()
        self.model_dir = model.resolved_path()
        self.enforce_eager = enforce_eager  # None: `eager_default` at start
        self._request_ids = (str(n) for n in itertools.count())
        self._llm = None
        self._auto: AutoDraftsReport | None = None
        self._start(self._resolve(drafts))

    def _resolve(self, drafts: Drafts) -> int:
        """The K to run: auto's is chosen once, before vLLM first starts with it."""
        if drafts != AUTO_DRAFTS:
            return drafts
        if self._auto is None:
            _, self._auto = fixed_choice(self.preset)
        return self._auto.last.k

    def auto_drafts_report(self) -> AutoDraftsReport | None:
        return self._auto

    def _start(self, drafts: int) -> None:
        check_model_folder(self.model_dir, drafts)
        # Keep stderr for our own messages; vLLM's INFO lines and per-tensor dtype
        # notes drown them.  Set before import: vLLM reads it once, and its
        # engine process inherits it.
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        import torch

        if self.enforce_eager is None:
            self.enforce_eager = eager_default(torch.cuda.is_available())
        if not torch.cuda.is_available():
            os.environ.setdefault(CPU_KV_CACHE_ENV, str(default_cpu_kv_cache_gib(psutil.virtual_memory().available)))
        from vllm import LLM

        budget = self.preset.pixels
        spec_options = (
            {
                "speculative_config": {"method": "mtp", "num_speculative_tokens": drafts},
                "per_request_spec_decode_metrics": "summary",
            }
            if drafts
            else {}
        )
        try:
            self._llm = LLM(
                model=str(self.model_dir),
                # CPU vLLM needs bf16 for the Gated DeltaNet layers; on GPU it is the model's own dtype.
                dtype="bfloat16",
                # Prefix caching with MTP on this hybrid (linear + full attention) model crashes on CPU,
                # and pages share no prefix worth caching beyond the chat template.
                enable_prefix_caching=False,
                max_model_len=max_model_len(self.preset),
                limit_mm_per_prompt={"image": 1, "video": 0},
                # The same pixel budget as the transformers engine, so both see the same image tokens.
                mm_processor_kwargs={"size": {"shortest_edge": budget.min_pixels, "longest_edge": budget.max_pixels}},
                enforce_eager=self.enforce_eager,
                disable_log_stats=False,  # keeps the Prometheus counters that get_metrics() reads
                **spec_options,
            )
        except Exception as exc:  # vLLM reports a failed start as a bare RuntimeError from its engine process
            raise ModelError(f"vLLM could not start on {self.model_dir}: {str(exc).splitlines()[0]}") from exc
        self.drafts = drafts
        tokenizer = self._llm.get_tokenizer()
        self.prompt = render_page_prompt(tokenizer, self.preset)
        self.stop_token_ids = sorted({tokenizer.convert_tokens_to_ids(t) for t in STOP_TOKENS} - {None})

    def _use_drafts(self, drafts: Drafts) -> None:
        drafts = self._resolve(drafts)
        if drafts != self.drafts:
            log.info("restarting vLLM for %d drafts (was %d)", drafts, self.drafts)
            self.close()
            self._start(drafts)

    def _submit(self, image: Image.Image, settings: GenerationSettings, output_kind) -> str:
        from vllm import SamplingParams

        params = SamplingParams(
            max_tokens=settings.max_tokens,
            temperature=settings.temperature,
            top_p=settings.top_p,
            seed=settings.seed,
            stop_token_ids=self.stop_token_ids,
            output_kind=output_kind,
            logprobs=2 if settings.logit_gaps else None,  # raw log-probs: their top-2 gap is the logits'
        )
        if settings.ban_loops and self.bans_loops:
            params._bad_words_token_ids = [vllm_loop_ban.LOOP_BAN]
        request_id = next(self._request_ids)
        self._llm.llm_engine.add_request(request_id, {"prompt": self.prompt, "multi_modal_data": {"image": image}}, params)
        return request_id

    def _page_text(self, output, wall_s: float) -> PageText:
        completion = output.outputs[0]
        token_ids = list(completion.token_ids)
        output_tokens = len(token_ids)
        if token_ids and token_ids[-1] in self.stop_token_ids:
            token_ids.pop()
        metrics = PageMetrics(
            prompt_tokens=len(output.prompt_token_ids or ()),
            output_tokens=output_tokens,
            wall_s=wall_s,
            finish_reason="stop" if completion.finish_reason == "stop" else "length",
            drafts=self.drafts,
            spec=page_spec_stats(completion, self.drafts),
        )
        return PageText(text=completion.text, token_ids=tuple(token_ids), metrics=metrics,
                        top2_gaps=top2_gaps(completion.logprobs))

    def read(self, image: Image.Image, settings: GenerationSettings, on_text: TextCallback | None = None) -> PageText:
        from vllm.sampling_params import RequestOutputKind

        self._use_drafts(settings.drafts)
        engine = self._llm.llm_engine
        started = time.perf_counter()
        request_id = self._submit(image, settings, RequestOutputKind.CUMULATIVE if on_text else RequestOutputKind.FINAL_ONLY)
        emitted = ""
        try:
            while True:
                for output in engine.step():
                    if output.request_id != request_id:
                        continue
                    text = output.outputs[0].text
                    if on_text and len(text) > len(emitted):
                        on_text(text[len(emitted) :])
                        emitted = text
                    if output.finished:
                        return self._page_text(output, time.perf_counter() - started)
        except BaseException:
            engine.abort_request([request_id])
            raise

    def read_many(
        self, pages: Iterable[tuple[Key, Image.Image]], settings: GenerationSettings, concurrency: int
    ) -> Iterator[tuple[Key, PageText]]:
        from vllm.sampling_params import RequestOutputKind

        self._use_drafts(settings.drafts)
        engine = self._llm.llm_engine
        waiting = iter(pages)
        in_flight: dict[str, tuple[Key, float]] = {}  # request id -> (key, submitted at)
        try:
            while True:
                for key, image in itertools.islice(waiting, concurrency - len(in_flight)):
                    submitted = time.perf_counter()
                    in_flight[self._submit(image, settings, RequestOutputKind.FINAL_ONLY)] = (key, submitted)
                if not in_flight:
                    return
                for output in engine.step():
                    if output.finished and output.request_id in in_flight:
                        key, started = in_flight.pop(output.request_id)
                        yield key, self._page_text(output, time.perf_counter() - started)
        finally:
            if in_flight:  # the caller stopped early: free vLLM of pages nobody will collect
                engine.abort_request(list(in_flight))

    def spec_totals(self) -> SpecDecodingStats:
        """The engine's counters since it started (Prometheus, via `LLM.get_metrics()`)."""
        return from_engine_metrics(self._llm.get_metrics())

    def close(self) -> None:
        if self._llm is not None:
            self._llm.llm_engine.engine_core.shutdown()
            self._llm = None
