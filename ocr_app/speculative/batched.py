"""Batched greedy decoding for the transformers engine: many sequences (bands or pages) in one forward per
step, plain (drafts 0) or self-speculative with the MTP head (drafts K), each sequence with its own length,
its own accepted drafts and its own cache rollback.  Sequences join as others finish (continuous batching).

Layout: padded columns.  Each attention cache (the main model's full-attention layers, the head's layer) is
one tensor per layer, [B, kv heads, S, D], with a validity mask `valid` [B, S]: column s holds one of row
b's tokens or a hole, and the attention mask hides holes.  Positions (text row and M-RoPE rows) are
explicit per row, so a hole shifts nothing.

* A sequence joins after its prefill ran alone (batch 1, as `SpeculativeDecoder` runs it): its keys are
  left-padded to the batch's width (holes) and its linear-attention states stacked into the batch.  The
  head's prefill (every prompt pair) also runs alone at join.
* Every step feeds the same T tokens to every row (T = K+1: the last token and K drafts; T = 1 without
  drafts), so the new columns are real in every row and padding never reaches a Gated DeltaNet layer
  (transformers' Qwen3.5 zeroes padded inputs there, exact only for a prompt's left padding from a zero
  state; its chunked kernel would also cut chunks at other places than in a lone read).
* Rollback per row: a row that keeps n of its T tokens turns the other T-n new columns into holes; its
  conv window is cut to end at its n-th input and its recurrent state is the one recorded after its n-th
  token (`cache.RecordedStates` records every position of a verify pass).
* A finished row is dropped from the batch and columns that are holes in every row are dropped.

With `drafts="auto"` an `AutoDrafts` chooses one K per step for the whole batch (it is told the batch
size, which scales a round's cost and its tokens alike); a step with no drafts feeds the head nothing, and
each row's pairs wait for the next step that drafts (`_Rows.pending_*` grow as needed).

Greedy only: sampled reads (a retry's temperature) are read one at a time, where each page's seeded draws
are its own.  The main model decides every token, so the text is plain greedy decoding's.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from ocr_app.engines.protocol import AUTO_DRAFTS, Drafts
from ocr_app.metrics import counted_drafts
from ocr_app.speculative.auto import AutoDrafts
from ocr_app.speculative.cache import RecordedStates, attention_layers, linear_layers
from ocr_app.speculative.decoder import Generation, embed_prompt
from ocr_app.speculative.mtp_head import MTPHead


class PaddedCache:
    """A DynamicCache holding a batch in padded columns, with the mask of which columns are real per row."""

    def __init__(self, cache: DynamicCache, width: int, device: torch.device):
        self.cache = cache
        self.valid = torch.ones(1, width, dtype=torch.bool, device=device)  # [B, S]
        for layer in linear_layers(cache):
            # A recorded prefill shorter than the conv window keeps fewer inputs: the window's zeros are implied.
            layer.conv_states[0] = _left_pad(layer.conv_states[0], layer.conv_kernel_size[0])

    @property
    def width(self) -> int:
        return self.valid.shape[1]

    def attention_mask(self, new_valid: torch.Tensor) -> torch.Tensor:  # [B, T] -> [B, 1, T, S+T], True = attend
        """Takes in the T columns the next forward appends; the mask for that forward."""
        start, count = self.width, new_valid.shape[1]
        self.valid = torch.cat([self.valid, new_valid], dim=1)
        columns = torch.arange(start + count, device=new_valid.device)
        query_columns = start + torch.arange(count, device=new_valid.device)
        causal = columns[None, :] <= query_columns[:, None]  # [T, S+T]
        # A padding query sees itself: a row with no key would give NaN (its output is never used).
        itself = columns[None, :] == query_columns[:, None]
        return ((self.valid[:, None, :] & causal[None]) | itself[None])[:, None]

    def keep_new(self, num_new: int, kept: torch.Tensor) -> None:
        """Of the last `num_new` columns, row b keeps its first kept[b]; the rest become holes."""
        columns = torch.arange(self.width, device=kept.device)
        self.valid &= columns[None, :] < (self.width - num_new + kept)[:, None]

    def drop_last(self, count: int) -> None:
        if count:
            for layer in attention_layers(self.cache):
                layer.crop(-count)
            self.valid = self.valid[:, :-count]

    def select(self, rows: torch.Tensor) -> None:
        """Keeps the given rows, in that order, and drops the columns that are then holes in every row."""
        for layer in attention_layers(self.cache):
            layer.batch_select_indices(rows)
        for layer in linear_layers(self.cache):
            layer.reorder_cache(rows)
        self.valid = self.valid[rows]
        used = self.valid.any(dim=0)
        if not bool(used.all()):
            columns = used.nonzero().squeeze(1)
            for layer in attention_layers(self.cache):
                layer.keys, layer.values = layer.keys[:, :, columns], layer.values[:, :, columns]
            self.valid = self.valid[:, columns]

    def join(self, other: DynamicCache, width: int) -> None:
        """Appends the one row of `other` (`width` real columns), left-padding the narrower side with holes."""
        total = max(self.width, width)
        for mine, theirs in zip(attention_layers(self.cache), attention_layers(other), strict=True):
            mine.keys = torch.cat([_left_pad(mine.keys, total), _left_pad(theirs.keys, total)])
            mine.values = torch.cat([_left_pad(mine.values, total), _left_pad(theirs.values, total)])
        for mine, theirs in zip(linear_layers(self.cache), linear_layers(other), strict=True):
            theirs_conv = _left_pad(theirs.conv_states[0], theirs.conv_kernel_size[0])  # as in __init__
            mine.conv_states[0] = torch.cat([mine.conv_states[0], theirs_conv])
            mine.recurrent_states[0] = torch.cat([mine.recurrent_states[0], theirs.recurrent_states[0]])
        ones = torch.ones(1, width, dtype=torch.bool, device=self.valid.device)
        self.valid = torch.cat([_left_pad(self.valid, total, dim=1), _left_pad(ones, total, dim=1)])


def _left_pad(tensor: torch.Tensor, width: int, dim: int = 2) -> torch.Tensor:
    missing = width - tensor.shape[dim]
    if not missing:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)


@dataclass
class _Rows:
    """Per-row state of the batch, one entry (or tensor row) per sequence, in cache row order."""

    keys: list[Hashable]
    generations: list[Generation]
    max_tokens: int
    device: torch.device
    cached: torch.Tensor  # [B] tokens in the main cache = text position of the last output token
    rope_delta: torch.Tensor  # [B]
    last_token: torch.Tensor  # [B] last output token, fed first in the next step
    # MTP head: the pairs (h_t, x_{t+1}) the head has not seen, left-aligned, pending_count[b] of them per row
    # (P columns: at least the largest count)
    pending_tokens: torch.Tensor | None = None  # [B, P] x_{t+1}
    pending_hidden: torch.Tensor | None = None  # [B, P, H] h_t
    pending_positions: torch.Tensor | None = None  # [3, B, P] M-RoPE positions of h_t
    pending_count: torch.Tensor | None = None  # [B]; 0 for a row that just joined or was just fed to the head
    head_hidden: torch.Tensor | None = None  # [B, H] the head's last g, where pending_count is 0
    last_position: torch.Tensor | None = None  # [B] M-RoPE temporal position of the last pair the head saw

    def select(self, rows: list[int]) -> None:
        index = torch.tensor(rows, device=self.device)
        self.keys = [self.keys[row] for row in rows]
        self.generations = [self.generations[row] for row in rows]
        for name in _ROW_TENSORS:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value[index])
        if self.pending_positions is not None:
            self.pending_positions = self.pending_positions[:, index]


# _Rows' tensors whose first dimension is the row (pending_positions has it second)
_ROW_TENSORS = ("cached", "rope_delta", "last_token", "pending_tokens", "pending_hidden", "pending_count", "head_hidden",
                "last_position")


def _cat(mine: torch.Tensor | None, theirs: torch.Tensor, dim: int = 0) -> torch.Tensor:
    return theirs if mine is None else torch.cat([mine, theirs], dim=dim)


def _right_pad(tensor: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    missing = width - tensor.shape[dim]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor, tensor.new_zeros(shape)], dim=dim)


# _Rows' pending-pair tensors and the dimension of their pair columns
_PENDING = (("pending_tokens", 1), ("pending_hidden", 1), ("pending_positions", 2))


class BatchedDecoder:
    """Greedy decoding of many sequences at once; `head` None decodes without drafts; `auto` chooses K per
    step when `drafts` is "auto"."""

    def __init__(self, model, head: MTPHead | None, stop_token_ids: list[int], drafts: Drafts,
                 auto: AutoDrafts | None = None):
        assert (head is None) == (drafts == 0), "drafting needs the head"
        assert (auto is not None) == (drafts == AUTO_DRAFTS), "drafts auto needs a chooser"
        self.model = model
        self.head = head
        self.drafts = drafts
        self.auto = auto
        self.stop_token_ids = set(stop_token_ids)
        self.recorder = RecordedStates()
        self.embed_tokens = model.model.language_model.get_input_embeddings()
        self.main: PaddedCache | None = None
        self.head_cache: PaddedCache | None = None
        self.rows: _Rows | None = None

    @torch.inference_mode()
    def generate_many(
        self, requests: Iterable[tuple[Hashable, dict[str, torch.Tensor]]], max_tokens: int, concurrency: int
    ) -> Iterator[tuple[Hashable, Generation]]:
        """Each request's greedy generation, in completion order; up to `concurrency` sequences per step."""
        pending = iter(requests)
        exhausted = False
        while True:
            while not exhausted and (self.rows is None or len(self.rows.keys) < concurrency):
                request = next(pending, None)
                if request is None:
                    exhausted = True
                    break
                finished = self._join(*request, max_tokens)
                if finished is not None:
                    yield request[0], finished
            if self.rows is None:
                return
            self._step()
            yield from self._leave()

    def _language_model(self, embeds, positions, cache, mask=None):  # [B, T, H], [4, B, T] -> [B, T, H]
        masks = None if mask is None else {"full_attention": mask, "linear_attention": None}
        output = self.model.model.language_model(
            inputs_embeds=embeds, position_ids=positions, past_key_values=cache, attention_mask=masks, use_cache=True
        )
        return output.last_hidden_state

    def _greedy(self, hidden: torch.Tensor) -> torch.Tensor:  # [..., H] -> [...] token ids
        return self.model.lm_head(hidden).argmax(dim=-1)

    def _join(self, key: Hashable, inputs: dict[str, torch.Tensor], max_tokens: int) -> Generation | None:
        """Prefills one sequence alone and adds it to the batch; its generation if it is already finished."""
        prompt = embed_prompt(self.model, inputs)
        cache = self.recorder.new_cache(self.model) if self.head is not None else DynamicCache(config=self.model.config)
        hidden = self._language_model(prompt.embeds, prompt.positions, cache)  # [1, L, H]
        if self.head is not None:
            self.recorder.after_prefill(cache)
        first = int(self._greedy(hidden[0, -1]))
        generation = Generation([first], stopped=first in self.stop_token_ids)
        if generation.stopped or max_tokens == 1:
            return generation
        width, device = prompt.embeds.shape[1], self.model.device
        row = _Rows([key], [generation], max_tokens, device, torch.tensor([width], device=device),
                    torch.tensor([prompt.rope_delta], device=device), torch.tensor([first], device=device))
        head_cache = None
        if self.head is not None:
            head_cache = DynamicCache()
            # the pairs of the whole prompt and the first token, as the lone decoder's first proposal feeds them
            next_embeds = torch.cat([prompt.embeds[:, 1:], self.embed_tokens(row.last_token[None])], dim=1)
            mrope = prompt.positions[1:]  # [3, 1, L]
            row.head_hidden = self.head(next_embeds, hidden, mrope, head_cache)[:, -1]  # [1, H]
            row.last_position = mrope[0, :, -1]
            row.pending_count = torch.zeros(1, dtype=torch.long, device=device)
            row.pending_tokens = torch.zeros(1, 0, dtype=torch.long, device=device)
            row.pending_hidden = hidden.new_zeros(1, 0, hidden.shape[-1])
            row.pending_positions = torch.zeros(3, 1, 0, dtype=torch.long, device=device)
        self._add(row, cache, head_cache, width)
        return None

    def _add(self, row: _Rows, cache: DynamicCache, head_cache: DynamicCache | None, width: int) -> None:
        if self.rows is None:
            self.rows = row
            self.main = PaddedCache(cache, width, row.device)
            self.head_cache = PaddedCache(head_cache, width, row.device) if head_cache is not None else None
            return
        rows = self.rows
        self.main.join(cache, width)
        if head_cache is not None:
            self.head_cache.join(head_cache, width)
        rows.keys += row.keys
        rows.generations += row.generations
        if row.pending_tokens is not None:  # pair columns to the wider of the two
            width = max(rows.pending_tokens.shape[1], row.pending_tokens.shape[1])
            for name, dim in _PENDING:
                setattr(rows, name, _right_pad(getattr(rows, name), width, dim))
                setattr(row, name, _right_pad(getattr(row, name), width, dim))
        for name in _ROW_TENSORS:
            if getattr(row, name) is not None:
                setattr(rows, name, _cat(getattr(rows, name), getattr(row, name)))
        if row.pending_positions is not None:
            rows.pending_positions = _cat(rows.pending_positions, row.pending_positions, dim=1)

    def _positions(self, count: int) -> torch.Tensor:  # -> [4, B, count]: text row, then M-RoPE rows
        rows = self.rows
        text = rows.cached[:, None] + torch.arange(count, device=rows.device)[None, :]  # [B, count]
        return torch.stack([text, *(text + rows.rope_delta[:, None]).expand(3, -1, -1)])

    def _propose(self, drafts: int) -> torch.Tensor:  # -> [B, K] draft ids
        """The head sees each row's newly verified pairs (right-aligned, holes on the left), then chains K-1 steps."""
        rows, head = self.rows, self.head
        width = int(rows.pending_count.max())
        hidden = rows.head_hidden
        if width:
            # column j of the new segment is row b's pending pair j - (width - count[b]), a hole where negative
            source = torch.arange(width, device=rows.device)[None, :] - (width - rows.pending_count)[:, None]
            real = source >= 0
            source = source.clamp_min(0)  # [B, width]
            tokens = rows.pending_tokens.gather(1, source)
            pair_hidden = rows.pending_hidden.gather(1, source[..., None].expand(-1, -1, rows.pending_hidden.shape[-1]))
            positions = rows.pending_positions.gather(2, source[None].expand(3, -1, -1))
            mask = self.head_cache.attention_mask(real)
            output = head(self.embed_tokens(tokens), pair_hidden, positions, self.head_cache.cache, mask)
            fed = rows.pending_count > 0
            hidden = torch.where(fed[:, None], output[:, -1], hidden)
            rows.last_position = torch.where(fed, positions[0, :, -1], rows.last_position)
            rows.head_hidden = hidden
            rows.pending_count = torch.zeros_like(rows.pending_count)
        guesses = [head.logits(hidden).argmax(dim=-1)]  # [B] each
        ones = torch.ones(len(rows.keys), 1, dtype=torch.bool, device=rows.device)
        for step in range(1, drafts):
            positions = (rows.last_position + step).view(1, -1, 1).expand(3, -1, 1)
            mask = self.head_cache.attention_mask(ones)
            hidden = head(self.embed_tokens(guesses[-1][:, None]), hidden[:, None], positions, self.head_cache.cache, mask)[:, -1]
            guesses.append(head.logits(hidden).argmax(dim=-1))
        # The chained steps' entries are the head's own guesses, never verified pairs: dropped at once.
        self.head_cache.drop_last(drafts - 1)
        return torch.stack(guesses, dim=1)

    def _step(self) -> None:
        """One forward of the main model for every row: its last token, and its drafts when drafting."""
        rows = self.rows
        started = time.perf_counter()
        drafts = self.auto.choose(len(rows.keys)) if self.auto is not None else self.drafts
        draft_ids = self._propose(drafts) if drafts else rows.last_token.new_zeros(len(rows.keys), 0)  # [B, K]
        fed = torch.cat([rows.last_token[:, None], draft_ids], dim=1)  # [B, K+1]
        positions = self._positions(drafts + 1)
        mask = self.main.attention_mask(torch.ones_like(fed, dtype=torch.bool))
        if self.head is not None:
            with self.recorder.verify_pass(self.main.cache):
                hidden = self._language_model(self.embed_tokens(fed), positions, self.main.cache, mask)
        else:
            hidden = self._language_model(self.embed_tokens(fed), positions, self.main.cache, mask)
        targets = self._greedy(hidden)  # [B, K+1]
        lengths = torch.tensor([len(g.token_ids) for g in rows.generations], device=rows.device)
        # A row near its token limit verifies fewer drafts, as the lone decoder drafts fewer.
        allowed = (rows.max_tokens - lengths - 1).clamp(0, drafts)  # [B]
        matches = (draft_ids == targets[:, :drafts]) & (torch.arange(drafts, device=rows.device)[None] < allowed[:, None])
        accepted = matches.long().cumprod(dim=1).sum(dim=1)  # [B] leading drafts equal to the main model's own
        bonus = targets.gather(1, accepted[:, None]).squeeze(1)
        kept = accepted + 1
        if self.head is not None:
            self.main.keep_new(drafts + 1, kept)
            self._keep_linear_states(kept)
            # the pairs (h_t, x_{t+1}) this step made final: x_{t+1} are the accepted drafts and the bonus
            tokens = torch.cat([draft_ids, bonus[:, None]], dim=1).scatter(1, accepted[:, None], bonus[:, None])
            self._append_pending(tokens, hidden, positions[1:], kept)
        drafted = self._record(draft_ids, accepted, bonus, allowed, drafts)
        rows.cached += kept
        rows.last_token = bonus
        if self.auto is not None:
            self.auto.observe_round(drafts, len(rows.keys), time.perf_counter() - started, drafted)

    def _append_pending(self, tokens: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor,
                        kept: torch.Tensor) -> None:
        """Row b's first kept[b] of the T new pairs (tokens [B, T], hidden [B, T, H], positions [3, B, T]) go after
        its pending ones."""
        rows = self.rows
        if not bool(rows.pending_count.any()):  # the head has seen every pair before (it drafted this step)
            rows.pending_tokens, rows.pending_hidden, rows.pending_positions = tokens, hidden, positions
            rows.pending_count = kept
            return
        count = tokens.shape[1]
        width = int((rows.pending_count + kept).max())
        # column of each new pair; the ones not kept go to a spare last column, cut off below
        target = rows.pending_count[:, None] + torch.arange(count, device=rows.device)[None, :]  # [B, T]
        target = torch.where(torch.arange(count, device=rows.device)[None, :] < kept[:, None], target, width)
        for name, dim in _PENDING:
            value = {"pending_tokens": tokens, "pending_hidden": hidden, "pending_positions": positions}[name]
            buffer = _right_pad(getattr(rows, name)[(slice(None),) * dim + (slice(0, width),)], width + 1, dim)
            index = target if dim == 1 else target[None].expand(3, -1, -1)
            if value.dim() > index.dim():
                index = index[..., None].expand(*index.shape, value.shape[-1])
            setattr(rows, name, buffer.scatter(dim, index, value)[(slice(None),) * dim + (slice(0, width),)])
        rows.pending_count = rows.pending_count + kept

    def _keep_linear_states(self, kept: torch.Tensor) -> None:
        """Each row's conv window ends at its kept[b]-th fed input; its recurrent state is the one after it."""
        rows = torch.arange(kept.shape[0], device=kept.device)
        for layer, states in zip(linear_layers(self.main.cache), self.recorder.per_position, strict=True):
            conv = layer.conv_states[0]  # [B, C, window + T]: the window before the step, then the T inputs
            window = layer.conv_kernel_size[0]
            columns = kept[:, None] + torch.arange(window, device=kept.device)[None, :]  # [B, window]
            layer.conv_states[0] = conv.gather(2, columns[:, None, :].expand(-1, conv.shape[1], -1))
            layer.recurrent_states[0] = states[rows, kept - 1].contiguous()  # states: [B, T, Hv, Dk, Dv]

    def _record(self, draft_ids: torch.Tensor, accepted: torch.Tensor, bonus: torch.Tensor, allowed: torch.Tensor,
                drafts: int) -> list[tuple[int, int]]:
        """Each row's new tokens and counters; the counted drafts and acceptances of the rows that drafted."""
        drafted_rows = []
        for generation, drafted, num_accepted, token, num_allowed in zip(
            self.rows.generations, draft_ids.tolist(), accepted.tolist(), bonus.tolist(), allowed.tolist(), strict=True
        ):
            generation.rounds_by_k[drafts] += 1
            new = [*drafted[:num_accepted], token]
            stop_at = next((i for i, t in enumerate(new) if t in self.stop_token_ids), None)
            if num_allowed:
                drafted_rows.append(counted_drafts(num_allowed, num_accepted, stop_at))
                generation.stats.observe_draft(*drafted_rows[-1])
            if stop_at is not None:
                new, generation.stopped = new[: stop_at + 1], True
            generation.token_ids.extend(new)
        return drafted_rows

    def _leave(self) -> Iterator[tuple[Hashable, Generation]]:
        rows = self.rows
        done = [g.stopped or len(g.token_ids) >= rows.max_tokens for g in rows.generations]
        if not any(done):
            return
        finished = [(key, g) for key, g, is_done in zip(rows.keys, rows.generations, done) if is_done]
        if self.auto is not None:
            for _, generation in finished:
                self.auto.observe_sequence(generation.rounds_by_k)
        staying = [row for row, is_done in enumerate(done) if not is_done]
        if staying:
            index = torch.tensor(staying, device=rows.device)
            rows.select(staying)
            self.main.select(index)
            if self.head_cache is not None:
                self.head_cache.select(index)
        else:
            self.rows = self.main = self.head_cache = None
        yield from finished
