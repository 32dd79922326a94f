"""The MTP (multi-token prediction) head of a Qwen3.5 checkpoint, as vLLM runs it.

Checkpoint layout (`mtp.*`, loaded exactly as vLLM's `Qwen3_5MultiTokenPredictor`):

    e = pre_fc_norm_embedding(embed(x_{t+1}))      # the main model's embedding, shared
    h = pre_fc_norm_hidden(h_t)                    # main model's last hidden state, after its final norm
    g = norm(layers.0(fc(cat([e, h]))))            # one full-attention decoder layer; g: the head's hidden state
    logits = lm_head(g)                            # shared with the main model; predicts x_{t+2}

The pair (h_t, x_{t+1}) sits at the position of h_t (vLLM's proposer keeps the
target positions and shifts the tokens), with the main model's M-RoPE position
triple for prompt tokens; for image tokens the "embedding" is the vision
encoder's output that replaced the placeholder in the main model's input, as in
vLLM.  Chained drafting feeds the head its own `g` (after `mtp.norm`) and its
own draft token.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn
from transformers.masking_utils import create_causal_mask
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

from ocr_app.checkpoint import HEAD_PREFIX, INDEX_NAME, inspect_mtp_head
from ocr_app.errors import ModelError


class MTPHead(nn.Module):
    """Parameters are the head's own (`mtp.*` without the prefix); embedding, lm_head and
    rotary embedding are borrowed from the main model and are not part of its state dict,
    so training the head (issue 5) leaves the main model alone."""

    def __init__(self, main_model):
        super().__init__()
        text_config = main_model.config.text_config
        hidden = text_config.hidden_size
        eps = text_config.rms_norm_eps
        # One full-attention layer of the main model's kind; the copied config makes it layer 0 of its own cache.
        self.config = copy.deepcopy(text_config)
        self.config.layer_types = ["full_attention"]
        self.config.num_hidden_layers = 1
        self.pre_fc_norm_embedding = Qwen3_5RMSNorm(hidden, eps=eps)
        self.pre_fc_norm_hidden = Qwen3_5RMSNorm(hidden, eps=eps)
        self.fc = nn.Linear(2 * hidden, hidden, bias=False)
        self.layers = nn.ModuleList([Qwen3_5DecoderLayer(self.config, layer_idx=0)])
        self.norm = Qwen3_5RMSNorm(hidden, eps=eps)
        language_model = main_model.model.language_model
        # A tuple keeps them out of this module's parameters and state dict.
        self._shared = (language_model.embed_tokens, main_model.lm_head, language_model.rotary_emb)

    @property
    def embed_tokens(self) -> nn.Embedding:
        return self._shared[0]

    @property
    def lm_head(self) -> nn.Linear:
        return self._shared[1]

    def forward(
        self,
        token_embeds: torch.Tensor,  # [B, T, H] embedding of x_{t+1}
        hidden: torch.Tensor,  # [B, T, H] main model's h_t (or the head's own g for chained steps)
        position_ids: torch.Tensor,  # [3, B, T] M-RoPE positions of h_t
        cache=None,  # transformers DynamicCache of the head; None = teacher-forced over the whole sequence
        attention_mask: torch.Tensor | None = None,  # [B, 1, T, cached + T]; None = causal (chained training passes its own)
    ) -> torch.Tensor:  # [B, T, H] g, after mtp.norm
        fused = self.fc(torch.cat([self.pre_fc_norm_embedding(token_embeds), self.pre_fc_norm_hidden(hidden)], dim=-1))
        mask = attention_mask
        if mask is None:
            mask = create_causal_mask(config=self.config, inputs_embeds=fused, attention_mask=None, past_key_values=cache)
        position_embeddings = self._shared[2](fused, position_ids)
        fused = self.layers[0](
            fused,
            position_embeddings=position_embeddings,
            attention_mask=mask,
            past_key_values=cache,
            use_cache=cache is not None,
        )
        return self.norm(fused)

    def logits(self, head_hidden: torch.Tensor) -> torch.Tensor:  # [..., H] -> [..., V]
        return self.lm_head(head_hidden)

    def teacher_forced_logits(
        self,
        input_embeds: torch.Tensor,  # [B, T, H] main model's input embeddings (image features merged in)
        hidden: torch.Tensor,  # [B, T, H] main model's last hidden states
        position_ids: torch.Tensor,  # [3, B, T]
    ) -> torch.Tensor:  # [B, T-1, V]; row t predicts x_{t+2}
        """The training forward: every pair (h_t, x_{t+1}) at once, no cache."""
        head_hidden = self(input_embeds[:, 1:], hidden[:, :-1], position_ids[..., :-1])
        return self.logits(head_hidden)


def load_mtp_head(model_dir: Path, main_model) -> MTPHead:
    """The head of `model_dir`, on the main model's device and dtype; a clear ModelError if it is unusable."""
    report = inspect_mtp_head(model_dir, main_model.config.text_config)
    if not report.usable:
        raise ModelError(f"cannot draft with the MTP head: {report.message}")
    index_path = model_dir / INDEX_NAME
    if index_path.exists():
        weight_map = json.loads(index_path.read_text())["weight_map"]
        shards = sorted({shard for name, shard in weight_map.items() if name.startswith(HEAD_PREFIX)})
    else:
        shards = ["model.safetensors"]
    state: dict[str, torch.Tensor] = {}
    for shard in shards:
        with safe_open(str(model_dir / shard), framework="pt") as handle:
            for name in handle.keys():
                if name.startswith(HEAD_PREFIX):
                    state[name[len(HEAD_PREFIX) :]] = handle.get_tensor(name)
    head = MTPHead(main_model)
    head.load_state_dict(state, strict=True)
    reference = main_model.lm_head.weight
    return head.to(device=reference.device, dtype=reference.dtype).eval()
