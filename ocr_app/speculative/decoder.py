"""Self-speculative decoding of one page with the MTP head (batch size 1).

Each round: the proposer drafts K tokens; the main model verifies [last, d_1..d_K]
in one forward; the rejection sampler accepts a prefix and adds the main
model's bonus token; the cache is rolled back to the last accepted token
(see `cache.py`); the accepted pairs go to the head for the next round.  The
main model decides every token, so greedy output equals plain greedy decoding
and sampled output has the main model's distribution.  With `ban_loops` the
main model's logits at every verified position lose the tokens that would end
the output in a loop after that position's prefix (accepted output + drafts
before it), as plain decoding's `LoopBan` does, so greedy output stays equal.

With `drafts="auto"` an `AutoDrafts` chooses K before each round and is told what the round accepted and how
long it took; a round it gives no drafts feeds the head nothing, so the pairs it made wait for the next
round that drafts.

Positions follow transformers' Qwen3.5 generate: 4 rows [text; M-RoPE t, h, w],
M-RoPE from `get_rope_index` for the prompt and position + rope delta after it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ocr_app.engines.protocol import AUTO_DRAFTS, GenerationSettings
from ocr_app.metrics import SpecDecodingStats, counted_drafts
from ocr_app.repetition import loop_tokens
from ocr_app.speculative.auto import AutoDrafts
from ocr_app.speculative.cache import ROLLBACKS
from ocr_app.speculative.mtp_head import MTPHead
from ocr_app.speculative.proposer import MTPProposer
from ocr_app.speculative.rejection_sampler import Verdict, sampling_probs, verify_greedy, verify_sampling

TokenCallback = Callable[[list[int]], None]


@dataclass
class Prompt:
    embeds: torch.Tensor  # [1, L, H] token embeddings with the image features merged in
    positions: torch.Tensor  # [4, 1, L] text row + M-RoPE rows
    rope_delta: int  # M-RoPE position - text position after the prompt


@dataclass
class Generation:
    token_ids: list[int]  # stop token included when the model stopped
    stopped: bool
    stats: SpecDecodingStats = field(default_factory=SpecDecodingStats)
    top2_gaps: list[float] = field(default_factory=list)  # per token: main model's top-2 logit gap there
    rounds_by_k: Counter[int] = field(default_factory=Counter)  # verify rounds by the drafts they verified


def top2_gaps(logits: torch.Tensor) -> list[float]:  # [T, V] -> T gaps
    top = logits.topk(2, dim=-1).values  # [T, 2]
    return (top[:, 0] - top[:, 1]).tolist()


def ban_loop_tokens(logits: torch.Tensor, output_ids: list[int], draft_ids: list[int]) -> torch.Tensor:
    """logits: [K+1, V], row j after `output_ids` + the first j drafts; each row without the tokens
    that would make that prefix end in a loop (in place)."""
    for j in range(logits.shape[0]):
        banned = list(loop_tokens([*output_ids, *draft_ids[:j]]))
        if banned:
            logits[j, banned] = float("-inf")
    return logits


def embed_prompt(model, inputs: dict[str, torch.Tensor]) -> Prompt:
    """What `Qwen3_5Model.forward` does before its language model, kept so the head can see it too."""
    vl_model = model.model
    input_ids = inputs["input_ids"]  # [1, L]
    embeds = vl_model.get_input_embeddings()(input_ids)  # [1, L, H]
    if inputs.get("pixel_values") is not None:
        features = vl_model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"], return_dict=True)
        image_embeds = torch.cat(features.pooler_output, dim=0).to(embeds.dtype)  # [image tokens, H]
        image_mask, _ = vl_model.get_placeholder_mask(input_ids, inputs_embeds=embeds, image_features=image_embeds)
        embeds = embeds.masked_scatter(image_mask, image_embeds)
        mrope, deltas = vl_model.get_rope_index(
            input_ids, mm_token_type_ids=inputs["mm_token_type_ids"], image_grid_thw=inputs["image_grid_thw"]
        )  # [3, 1, L], [1, 1]
        rope_delta = int(deltas[0, 0])
    else:
        mrope = torch.arange(input_ids.shape[1], device=input_ids.device).view(1, 1, -1).expand(3, 1, -1)
        rope_delta = 0
    text = torch.arange(input_ids.shape[1], device=input_ids.device).view(1, 1, -1)
    return Prompt(embeds, torch.cat([text, mrope.to(text)], dim=0), rope_delta)


Pairs = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # x_{t+1} embeds [1, T, H], h_t [1, T, H], positions [3, 1, T]


def more_pairs(pending: Pairs | None, new: Pairs) -> Pairs:
    """Pairs the head has not seen yet, `new` after `pending` (None: the head saw everything before)."""
    if pending is None:
        return new
    return (torch.cat([pending[0], new[0]], dim=1), torch.cat([pending[1], new[1]], dim=1),
            torch.cat([pending[2], new[2]], dim=2))


class SpeculativeDecoder:
    def __init__(self, model, head: MTPHead, stop_token_ids: list[int], rollback: str = "recorded"):
        self.model = model
        self.head = head
        self.stop_token_ids = set(stop_token_ids)
        self.rollback_name = rollback

    def _forward(self, embeds: torch.Tensor, positions: torch.Tensor, cache) -> torch.Tensor:  # -> [1, T, H]
        language_model = self.model.model.language_model
        output = language_model(inputs_embeds=embeds, position_ids=positions, past_key_values=cache, use_cache=True)
        return output.last_hidden_state

    def _embed(self, token_ids: list[int]) -> torch.Tensor:  # -> [1, T, H]
        return self.head.embed_tokens(torch.tensor([token_ids], device=self.model.device))

    def _positions(self, start: int, count: int, rope_delta: int) -> torch.Tensor:  # -> [4, 1, count]
        text = torch.arange(start, start + count, device=self.model.device).view(1, 1, -1)
        return torch.cat([text, (text + rope_delta).expand(3, 1, -1)], dim=0)

    @torch.inference_mode()
    def generate(
        self, inputs: dict[str, torch.Tensor], settings: GenerationSettings, on_tokens: TokenCallback | None = None,
        auto: AutoDrafts | None = None,
    ) -> Generation:
        """`auto`: the chooser of K, needed (and used) when `settings.drafts` is "auto"."""
        assert (auto is not None) == (settings.drafts == AUTO_DRAFTS), "drafts auto needs a chooser"
        sampling = settings.temperature > 0
        generator = torch.Generator(self.model.device)
        if settings.seed is None:
            generator.seed()
        else:
            generator.manual_seed(settings.seed)

        def verify(
            output_ids: list[int], draft_ids: list[int], draft_probs: torch.Tensor | None, logits: torch.Tensor
        ) -> Verdict:
            if settings.ban_loops:  # logits: [K+1, V]
                logits = ban_loop_tokens(logits, output_ids, draft_ids)
            if not sampling:
                return verify_greedy(draft_ids, logits)
            target_probs = sampling_probs(logits, settings.temperature, settings.top_p)  # [K+1, V]
            return verify_sampling(draft_ids, draft_probs, target_probs, generator)

        rollback = ROLLBACKS[self.rollback_name]()
        proposer = MTPProposer(self.head, settings.temperature, settings.top_p, generator)
        prompt = embed_prompt(self.model, inputs)
        cache = rollback.new_cache(self.model)
        hidden = self._forward(prompt.embeds, prompt.positions, cache)  # [1, L, H]
        rollback.after_prefill(cache)
        logits = self.model.lm_head(hidden[0, -1:])  # [1, V]
        gaps = top2_gaps(logits)  # before `verify`, whose loop ban may change the logits
        first = verify([], [], None, logits).next_token
        result = Generation([first], stopped=first in self.stop_token_ids, top2_gaps=gaps)
        if on_tokens:
            on_tokens([first])
        # pairs (h_t, x_{t+1}) the head has not seen yet: the whole prompt and the first token
        pending: Pairs | None = (torch.cat([prompt.embeds[:, 1:], self._embed([first])], dim=1), hidden,
                                 prompt.positions[1:])
        cached = prompt.embeds.shape[1]  # tokens in the main cache; the last output token is not yet among them
        while not result.stopped and len(result.token_ids) < settings.max_tokens:
            round_started = time.perf_counter()
            k = auto.choose() if auto is not None else settings.drafts
            num_drafts = min(k, settings.max_tokens - len(result.token_ids) - 1)
            draft_ids, draft_probs = [], None
            if num_drafts:
                draft_ids, draft_probs = proposer.propose(*pending, num_drafts)
                pending = None
            fed = [result.token_ids[-1], *draft_ids]  # K+1
            embeds, positions = self._embed(fed), self._positions(cached, len(fed), prompt.rope_delta)
            with rollback.verify_pass(cache):
                hidden = self._forward(embeds, positions, cache)  # [1, K+1, H]
            logits = self.model.lm_head(hidden[0])  # [K+1, V]
            gaps = top2_gaps(logits)
            verdict = verify(result.token_ids, draft_ids, draft_probs, logits)
            kept = verdict.num_accepted + 1
            rollback.keep(cache, len(fed), kept, lambda n: self._forward(embeds[:, :n], positions[..., :n], cache))
            new = verdict.tokens(draft_ids)
            stop_at = next((i for i, token in enumerate(new) if token in self.stop_token_ids), None)
            counted = counted_drafts(num_drafts, verdict.num_accepted, stop_at)
            if num_drafts:
                result.stats.observe_draft(*counted)
            if stop_at is not None:
                new, result.stopped = new[: stop_at + 1], True
            result.token_ids.extend(new)
            result.top2_gaps.extend(gaps[: len(new)])
            if on_tokens:
                on_tokens(new)
            pending = more_pairs(pending, (self._embed(verdict.tokens(draft_ids)), hidden[:, :kept], positions[1:, :, :kept]))
            cached += kept
            result.rounds_by_k[num_drafts] += 1
            if auto is not None:
                drafted = [counted] if num_drafts else []
                auto.observe_round(num_drafts, 1, time.perf_counter() - round_started, drafted)
        if auto is not None:
            auto.observe_sequence(result.rounds_by_k)
        return result
