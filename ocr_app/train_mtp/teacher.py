"""The frozen main model as teacher: one teacher-forced pass over a page's prompt and its own output.

The pass yields what the head needs, exactly as the speculative decoder gives it
at inference: the main model's input embeddings (image features merged in), its
last hidden states (after the final norm) and the M-RoPE positions.  The model
is frozen: no parameter of it ever takes a gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from PIL import Image

from ocr_app.engines.hf import HFEngine
from ocr_app.speculative.decoder import embed_prompt


@dataclass
class TeacherPass:
    embeds: torch.Tensor  # [T, H] main model's input embeddings, image features merged in
    hidden: torch.Tensor  # [T, H] main model's last hidden states
    positions: torch.Tensor  # [3, T] M-RoPE positions
    prompt_len: int  # L; tokens L..T-1 are the model's own output

    @property
    def length(self) -> int:
        return self.hidden.shape[0]


class Teacher:
    def __init__(self, engine: HFEngine, device: torch.device):
        self.engine = engine
        self.model = engine.model.to(device).requires_grad_(False).eval()
        self.device = device

    @torch.no_grad()
    def page_pass(self, image: Image.Image, output_ids: tuple[int, ...]) -> TeacherPass:
        inputs = self.engine.page_inputs(image)  # the engine's own prompt and pixel budget
        prompt_len = inputs["input_ids"].shape[1]
        output = torch.tensor([output_ids], dtype=inputs["input_ids"].dtype)  # [1, N]
        inputs["input_ids"] = torch.cat([inputs["input_ids"], output], dim=1)  # [1, T]
        inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
        inputs["mm_token_type_ids"] = torch.cat([inputs["mm_token_type_ids"], torch.zeros_like(output)], dim=1)
        inputs = {name: value.to(self.device) for name, value in inputs.items()}
        prompt = embed_prompt(self.model, inputs)  # embeds [1, T, H], positions [4, 1, T]
        language_model = self.model.model.language_model
        hidden = language_model(inputs_embeds=prompt.embeds, position_ids=prompt.positions, use_cache=False).last_hidden_state
        return TeacherPass(prompt.embeds[0], hidden[0], prompt.positions[1:, 0], prompt_len)
