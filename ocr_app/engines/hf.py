"""The transformers engine: Qwen3_5ForConditionalGeneration on CPU or GPU.

drafts 0 runs transformers' own `generate` (also the independent reference the
speculative decoder is tested against); drafts > 0 runs `ocr_app.speculative`'s MTP
self-speculative decoder with the checkpoint's `mtp.*` head.  drafts "auto" lets one `AutoDrafts` per
engine choose K before every round (batched: every step) from what the engine's reads have measured so far;
its costs are timed on a blank page when it first drafts with auto.  Both honour
`ban_loops` (`LoopBan` here, `ban_loop_tokens` there: the same rule on the same
output prefix), so a re-read of a looping page is lossless too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
from PIL import Image
from transformers import (
    AutoProcessor,
    LogitsProcessor,
    LogitsProcessorList,
    Qwen3_5ForConditionalGeneration,
)
from transformers.generation.streamers import BaseStreamer

from ocr_app.config import ModelPreset
from ocr_app.engines.protocol import AUTO_DRAFTS, GenerationSettings, Key, PageText, TextCallback
from ocr_app.errors import ModelError
from ocr_app.metrics import PageMetrics
from ocr_app.prompts import render_page_prompt
from ocr_app.repetition import loop_tokens
from ocr_app.speculative.auto import AutoDrafts, AutoDraftsReport
from ocr_app.speculative.costs import calibrate, dummy_page
from ocr_app.speculative.decoder import SpeculativeDecoder, top2_gaps


def load_model_folder(path: Path, dtype: torch.dtype):
    """The processor and the main model of a checkpoint folder (the `mtp.*` head is not part of it)."""
    if not (path / "config.json").exists():
        raise ModelError(f"model folder {path} not found or has no config.json")
    try:
        processor = AutoProcessor.from_pretrained(path)
        model = Qwen3_5ForConditionalGeneration.from_pretrained(path, dtype=dtype).eval()
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load the model in {path}: {str(exc).splitlines()[0]}") from None
    return processor, model


class TextStreamer(BaseStreamer):
    """Decodes the growing output and passes each new piece of text on.

    Decoding the whole output each time keeps multi-byte characters that span
    tokens intact; pages are short enough for this to cost nothing.
    """

    def __init__(self, tokenizer, on_text: TextCallback, skip_prompt_tokens: int):
        self.tokenizer = tokenizer
        self.on_text = on_text
        self.pending_prompt = skip_prompt_tokens
        self.token_ids: list[int] = []
        self.emitted = ""

    def put(self, value: torch.Tensor) -> None:
        ids = value.reshape(-1).tolist()
        if self.pending_prompt:  # generate() first hands over the prompt
            self.pending_prompt = 0
            return
        self.token_ids.extend(ids)
        text = self.tokenizer.decode(self.token_ids, skip_special_tokens=True)
        if len(text) > len(self.emitted) and not text.endswith("\ufffd"):
            self.on_text(text[len(self.emitted) :])
            self.emitted = text

    def end(self) -> None:
        pass


class LoopBan(LogitsProcessor):
    """`generate`'s side of `ban_loops`: no next token that would make the output (the ids after the
    prompt) end in a repetition loop."""

    def __init__(self, prompt_tokens: int):
        self.prompt_tokens = prompt_tokens

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        for row, ids in enumerate(input_ids[:, self.prompt_tokens :].tolist()):
            banned = list(loop_tokens(ids))
            if banned:
                scores[row, banned] = float("-inf")
        return scores


class HFEngine:
    name = "hf"
    bans_loops = True  # `ban_loops` is applied alike with and without drafts

    def __init__(self, model: ModelPreset, rollback: str = "recorded", device: str = "cpu"):
        self.preset = model
        self.rollback = rollback
        self._decoder = None
        self._auto: AutoDrafts | None = None
        dtype = torch.float32 if model.hf_dtype == "float32" else torch.bfloat16
        if model.hf_threads is not None:
            torch.set_num_threads(model.hf_threads)
        self.processor, self.model = load_model_folder(model.resolved_path(), dtype)
        self.model.to(device)
        self.prompt = render_page_prompt(self.processor, model)
        tokenizer = self.processor.tokenizer
        self.stop_token_ids = sorted(
            {tokenizer.convert_tokens_to_ids(token) for token in ("<|im_end|>", "<|endoftext|>")} - {None}
        )

    def page_inputs(self, image: Image.Image) -> dict[str, torch.Tensor]:
        """The model inputs for one page: the prompt and the image, as this engine reads it (training reuses them)."""
        budget = self.preset.pixels
        return self.processor(
            text=[self.prompt],
            images=[image],
            return_tensors="pt",
            images_kwargs={"size": {"shortest_edge": budget.min_pixels, "longest_edge": budget.max_pixels}},
        ).to(self.model.device)

    def _speculative_decoder(self):
        """Loaded on first use: plain decoding never needs the head."""
        if self._decoder is None:
            from ocr_app.speculative.mtp_head import load_mtp_head

            head = load_mtp_head(self.preset.resolved_path(), self.model)
            self._decoder = SpeculativeDecoder(self.model, head, self.stop_token_ids, rollback=self.rollback)
        return self._decoder

    def _auto_drafts(self, settings: GenerationSettings) -> AutoDrafts | None:
        """The engine's chooser of K when `settings` ask for auto drafts (made, and its costs timed, on first use)."""
        if settings.drafts != AUTO_DRAFTS:
            return None
        if self._auto is None:
            costs = calibrate(self._speculative_decoder(), self.page_inputs(dummy_page(self.preset)))
            self._auto = AutoDrafts(self.preset.auto_drafts, costs, "acceptance counted in this run blended with the "
                                    "preset's prior; costs timed at start, plus the overhead measured from the run's rounds")
        return self._auto

    def auto_drafts_report(self) -> AutoDraftsReport | None:
        return self._auto.report() if self._auto is not None else None

    def _read_speculative(
        self, image: Image.Image, settings: GenerationSettings, on_text: TextCallback | None
    ) -> PageText:
        decoder = self._speculative_decoder()
        auto = self._auto_drafts(settings)
        inputs = self.page_inputs(image)
        streamer = TextStreamer(self.processor.tokenizer, on_text, skip_prompt_tokens=0) if on_text else None
        started = time.perf_counter()
        generation = decoder.generate(
            inputs, settings, on_tokens=(lambda ids: streamer.put(torch.tensor(ids))) if streamer else None, auto=auto
        )
        return self._page_text(generation, inputs["input_ids"].shape[1], time.perf_counter() - started, settings)

    def _page_text(self, generation, prompt_tokens: int, wall_s: float, settings: GenerationSettings) -> PageText:
        """A page from a `Generation` of the speculative or batched decoder (stats kept only when drafting)."""
        new_ids = generation.token_ids
        token_ids = tuple(new_ids[:-1] if generation.stopped else new_ids)
        metrics = PageMetrics(
            prompt_tokens=prompt_tokens,
            output_tokens=len(new_ids),
            wall_s=wall_s,
            finish_reason="stop" if generation.stopped else "length",
            drafts=settings.drafts,
            spec=generation.stats if settings.drafts else None,
        )
        text = self.processor.tokenizer.decode(token_ids, skip_special_tokens=True)
        gaps = tuple(generation.top2_gaps) if settings.logit_gaps else None
        return PageText(text=text, token_ids=token_ids, metrics=metrics, top2_gaps=gaps)

    def read(self, image: Image.Image, settings: GenerationSettings, on_text: TextCallback | None = None) -> PageText:
        if settings.drafts:
            return self._read_speculative(image, settings, on_text)
        inputs = self.page_inputs(image)
        prompt_tokens = inputs["input_ids"].shape[1]
        streamer = TextStreamer(self.processor.tokenizer, on_text, prompt_tokens) if on_text else None
        if settings.seed is not None:
            torch.manual_seed(settings.seed)
        sampling = settings.temperature > 0
        started = time.perf_counter()
        with torch.inference_mode():
            output = self.model.generate(
                **inputs,
                max_new_tokens=settings.max_tokens,
                do_sample=sampling,
                temperature=settings.temperature if sampling else None,
                top_p=settings.top_p if sampling else None,
                top_k=None,
                eos_token_id=self.stop_token_ids,
                pad_token_id=self.stop_token_ids[0],
                logits_processor=LogitsProcessorList([LoopBan(prompt_tokens)] if settings.ban_loops else []),
                streamer=streamer,
                return_dict_in_generate=True,
                output_logits=settings.logit_gaps,  # the raw logits, before any loop ban
            )
        wall_s = time.perf_counter() - started
        new_ids = output.sequences[0, prompt_tokens:].tolist()
        stopped = bool(new_ids) and new_ids[-1] in self.stop_token_ids
        token_ids = tuple(new_ids[:-1] if stopped else new_ids)
        text = self.processor.tokenizer.decode(token_ids, skip_special_tokens=True)
        metrics = PageMetrics(
            prompt_tokens=prompt_tokens,
            output_tokens=len(new_ids),
            wall_s=wall_s,
            finish_reason="stop" if stopped else "length",
            drafts=0,
        )
        gaps = tuple(gap for step in output.logits for gap in top2_gaps(step)) if settings.logit_gaps else None
        return PageText(text=text, token_ids=token_ids, metrics=metrics, top2_gaps=gaps)

    def read_many(
        self, pages: Iterable[tuple[Key, Image.Image]], settings: GenerationSettings, concurrency: int
    ) -> Iterator[tuple[Key, PageText]]:
        """Greedy reads go through `BatchedDecoder`, up to `concurrency` pages in each forward; sampled reads
        (or any setting beyond max tokens and drafts: a loop ban, logit gaps) one page at a time as `read` does."""
        greedy = GenerationSettings(max_tokens=settings.max_tokens, drafts=settings.drafts)
        if settings != greedy or concurrency < 2:
            for key, image in pages:
                yield key, self.read(image, settings)
            return
        from ocr_app.speculative.batched import BatchedDecoder

        head = self._speculative_decoder().head if settings.drafts else None
        decoder = BatchedDecoder(self.model, head, self.stop_token_ids, settings.drafts, self._auto_drafts(settings))
        started: dict[Key, float] = {}
        prompt_tokens: dict[Key, int] = {}

        def requests() -> Iterator[tuple[Key, dict[str, torch.Tensor]]]:
            for key, image in pages:
                started[key] = time.perf_counter()
                inputs = self.page_inputs(image)
                prompt_tokens[key] = inputs["input_ids"].shape[1]
                yield key, inputs

        for key, generation in decoder.generate_many(requests(), settings.max_tokens, concurrency):
            wall_s = time.perf_counter() - started.pop(key)
            yield key, self._page_text(generation, prompt_tokens.pop(key), wall_s, settings)

    def close(self) -> None:
        self.model = None
        self._decoder = None
