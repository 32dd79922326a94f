"""The transformers engine: Qwen3_5ForConditionalGeneration on CPU or GPU.

drafts 0 runs transformers' own `generate` (also the independent reference the
speculative decoder is tested against); drafts > 0 runs `ocr_app.spec`'s MTP
self-speculative decoder with the checkpoint's `mtp.*` head.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
from PIL import Image
from transformers import AutoProcessor, Qwen3_5ForConditionalGeneration
from transformers.generation.streamers import BaseStreamer

from ocr_app.config import ModelPreset
from ocr_app.engines import GenerationSettings, Key, PageText, TextCallback
from ocr_app.errors import ModelError
from ocr_app.metrics import PageMetrics
from ocr_app.prompts import render_page_prompt


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


class HFEngine:
    name = "hf"

    def __init__(self, model: ModelPreset, rollback: str = "recorded", device: str = "cpu"):
        self.preset = model
        self.rollback = rollback
        self._decoder = None
        dtype = torch.float32 if model.hf_dtype == "float32" else torch.bfloat16
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
            from ocr_app.spec.decoder import SpeculativeDecoder
            from ocr_app.spec.mtp_head import load_mtp_head

            head = load_mtp_head(self.preset.resolved_path(), self.model)
            self._decoder = SpeculativeDecoder(self.model, head, self.stop_token_ids, rollback=self.rollback)
        return self._decoder

    def _read_speculative(
        self, image: Image.Image, settings: GenerationSettings, on_text: TextCallback | None
    ) -> PageText:
        decoder = self._speculative_decoder()
        inputs = self.page_inputs(image)
        streamer = TextStreamer(self.processor.tokenizer, on_text, skip_prompt_tokens=0) if on_text else None
        started = time.perf_counter()
        generation = decoder.generate(
            inputs, settings, on_tokens=(lambda ids: streamer.put(torch.tensor(ids))) if streamer else None
        )
        wall_s = time.perf_counter() - started
        new_ids = generation.token_ids
        token_ids = tuple(new_ids[:-1] if generation.stopped else new_ids)
        metrics = PageMetrics(
            prompt_tokens=inputs["input_ids"].shape[1],
            output_tokens=len(new_ids),
            wall_s=wall_s,
            finish_reason="stop" if generation.stopped else "length",
            drafts=settings.drafts,
            spec=generation.stats,
        )
        text = self.processor.tokenizer.decode(token_ids, skip_special_tokens=True)
        return PageText(text=text, token_ids=token_ids, metrics=metrics)

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
                streamer=streamer,
            )
        wall_s = time.perf_counter() - started
        new_ids = output[0, prompt_tokens:].tolist()
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
        return PageText(text=text, token_ids=token_ids, metrics=metrics)

    def read_many(
        self, pages: Iterable[tuple[Key, Image.Image]], settings: GenerationSettings, concurrency: int
    ) -> Iterator[tuple[Key, PageText]]:
        for key, image in pages:
            yield key, self.read(image, settings)

    def close(self) -> None:
        self.model = None
        self._decoder = None
