"""Prompts: the text the model sees for one page, built with the model's own chat template."""

from __future__ import annotations

from ocr_app.config import ModelPreset

# Without a chat template the image placeholder still has to be in the text:
# the processor expands it to one token per 32x32 px tile.
IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"


def page_messages(instruction: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": instruction}]}]


def render_page_prompt(processor, model: ModelPreset) -> str:
    """The prompt string for one page image; the same for every engine."""
    if not model.use_chat_template:
        return IMAGE_PLACEHOLDER + model.prompt
    return processor.apply_chat_template(
        page_messages(model.prompt),
        add_generation_prompt=True,
        tokenize=False,
        # Qwen3.5's template otherwise opens a <think> block; an OCR model answers directly.
        enable_thinking=False,
    )
