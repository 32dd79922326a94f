"""K chained draft steps of the MTP head over whole pages in one parallel pass, and the distillation loss.

At inference a round drafts from base position t: step 1 takes the main
model's (h_t, x_{t+1}); step j > 1 takes the head's own previous hidden state
and its own previous draft (argmax), one position further, and attends to the
head's cache of verified pairs 0..t plus the earlier steps of its own round.
Training reproduces exactly that for every base t at once: step 1 runs over the
whole page (the pairs of the prompt too, as the decoder feeds them), then each
chained step appends one entry per base to the same cache, with a mask that
lets base t see the step-1 entries up to t and its own chain only.

Step j's draft for base t is x_{t+j+1}; its teacher is the main model's
next-token distribution at position t+j of the teacher-forced page.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformers import DynamicCache

from ocr_app.errors import ModelError
from ocr_app.speculative.mtp_head import MTPHead
from ocr_app.train_mtp.teacher import TeacherPass


# Rows of vocabulary-sized logits (248 320 wide for Qwen3.5) the loss computes at once: at Qwen3.5-2B's
# size the loss's logits, not the model, set the training memory (docs/full-size.md).
LOSS_CHUNK_ROWS = 256


@dataclass
class HeadBatch:
    """Pages padded together for the head; S = longest page - 1, M = most bases of a page."""

    token_embeds: torch.Tensor  # [B, S, H] input embedding of x_{t+1} for pair t
    hidden: torch.Tensor  # [B, S, H] main model's h_t
    positions: torch.Tensor  # [3, B, S] M-RoPE positions of h_t
    main_hidden: torch.Tensor  # [B, S+1, H] main model's h at every position (the teacher's logits come from it)
    bases: torch.Tensor  # [B, M] pair index t of each draft chain
    base_valid: torch.Tensor  # [B, M]
    lengths: torch.Tensor  # [B] T of each page

    def step_valid(self, step: int) -> torch.Tensor:  # [B, M]: step j has a teacher at t + j <= T - 1
        return self.base_valid & (self.bases + step <= self.lengths[:, None] - 1)


def make_batch(passes: list[TeacherPass], max_bases: int | None, rng: random.Random | None, dtype: torch.dtype) -> HeadBatch:
    """Pad the pages together.  Bases are the output positions L-1..T-2 (where the decoder drafts);
    with `max_bases`, a window of that many chosen by `rng` (or the first ones without it)."""
    longest = max(p.length for p in passes)
    windows = []
    for page in passes:
        first, last = page.prompt_len - 1, page.length - 2  # bases whose first draft x_{t+2} exists
        count = last - first + 1
        if max_bases is not None and count > max_bases:
            first += rng.randint(0, count - max_bases) if rng is not None else 0
            count = max_bases
        windows.append((first, count))
    width = max(count for _, count in windows)
    device, hidden_size = passes[0].hidden.device, passes[0].hidden.shape[1]
    batch = HeadBatch(
        token_embeds=torch.zeros(len(passes), longest - 1, hidden_size, device=device, dtype=dtype),
        hidden=torch.zeros(len(passes), longest - 1, hidden_size, device=device, dtype=dtype),
        positions=torch.zeros(3, len(passes), longest - 1, device=device, dtype=torch.long),
        main_hidden=torch.zeros(len(passes), longest, hidden_size, device=device, dtype=passes[0].hidden.dtype),
        bases=torch.zeros(len(passes), width, device=device, dtype=torch.long),
        base_valid=torch.zeros(len(passes), width, device=device, dtype=torch.bool),
        lengths=torch.tensor([p.length for p in passes], device=device),
    )
    for i, (page, (first, count)) in enumerate(zip(passes, windows)):
        pairs = page.length - 1
        batch.token_embeds[i, :pairs] = page.embeds[1:]
        batch.hidden[i, :pairs] = page.hidden[:-1]
        batch.positions[:, i, :pairs] = page.positions[:, :-1]
        batch.main_hidden[i, : page.length] = page.hidden
        batch.bases[i, :count] = torch.arange(first, first + count, device=device)
        batch.base_valid[i, :count] = True
    return batch


def _mask(allowed: torch.Tensor, head: MTPHead) -> torch.Tensor:  # bool [B, Q, K] -> [B, 1, Q, K]
    allowed = allowed[:, None]
    implementation = head.config._attn_implementation
    if implementation == "sdpa":
        return allowed
    if implementation != "eager":  # flash kernels take no arbitrary mask: the chains would see each other
        raise ModelError(f"training the head needs sdpa or eager attention, not {implementation}")
    return torch.zeros(allowed.shape, dtype=head.fc.weight.dtype, device=allowed.device).masked_fill(
        ~allowed, torch.finfo(head.fc.weight.dtype).min
    )


def argmax_token(head: MTPHead, hidden: torch.Tensor) -> torch.Tensor:  # [..., H] -> [...]
    """The head's greedy token for each hidden state, LOSS_CHUNK_ROWS rows of logits at a time, no grad."""
    with torch.no_grad():
        rows = hidden.reshape(-1, hidden.shape[-1])
        tokens = [head.logits(chunk).argmax(dim=-1) for chunk in rows.split(LOSS_CHUNK_ROWS)]
        return torch.cat(tokens).view(hidden.shape[:-1])


def chained_logits(head: MTPHead, batch: HeadBatch, steps: int) -> list[torch.Tensor]:
    """The head's logits for steps 1..K at every base: K tensors [B, M, V]."""
    return [head.logits(hidden) for hidden in chained_hidden(head, batch, steps)]


def chained_hidden(head: MTPHead, batch: HeadBatch, steps: int) -> list[torch.Tensor]:
    """The head's hidden states for steps 1..K at every base: K tensors [B, M, H] (logits are the loss's)."""
    pairs = batch.hidden.shape[1]
    bases = batch.bases  # [B, M]
    cache = DynamicCache()
    causal = torch.ones(pairs, pairs, dtype=torch.bool, device=bases.device).tril()[None]  # [1, S, S]
    head_hidden = head(batch.token_embeds, batch.hidden, batch.positions, cache, attention_mask=_mask(causal, head))
    head_hidden = head_hidden.gather(1, bases[..., None].expand(-1, -1, head_hidden.shape[-1]))  # [B, M, H]
    hiddens = [head_hidden]
    sees_pairs = torch.arange(pairs, device=bases.device)[None, None, :] <= bases[..., None]  # [B, M, S]
    own_chain = torch.eye(bases.shape[1], dtype=torch.bool, device=bases.device).expand(bases.shape[0], -1, -1)
    base_position = batch.positions[0].gather(1, bases)  # [B, M] temporal M-RoPE row, as the proposer uses
    for step in range(2, steps + 1):
        draft_embeds = head.embed_tokens(argmax_token(head, hiddens[-1])).to(head_hidden.dtype)  # [B, M, H]
        positions = (base_position + step - 1)[None].expand(3, -1, -1)  # [3, B, M]
        allowed = torch.cat([sees_pairs, *[own_chain] * (step - 1)], dim=-1)  # [B, M, S + (step-1) M]
        head_hidden = head(draft_embeds, head_hidden, positions, cache, attention_mask=_mask(allowed, head))
        hiddens.append(head_hidden)
    return hiddens


@dataclass
class Acceptance:
    """Teacher-forced draft quality per step: `matched[j]` drafts at step j+1 equal the main model's
    argmax; `accepted[j]` drafts at steps 1..j+1 all do (what the decoder would accept); over `total[j]`."""

    matched: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    total: list[int] = field(default_factory=list)

    def add(self, step: int, matched: int, accepted: int, total: int) -> None:
        missing = step + 1 - len(self.total)
        if missing > 0:
            for counts in (self.matched, self.accepted, self.total):
                counts.extend([0] * missing)
        self.matched[step] += matched
        self.accepted[step] += accepted
        self.total[step] += total

    def merge(self, other: Acceptance) -> None:
        for step in range(len(other.total)):
            self.add(step, other.matched[step], other.accepted[step], other.total[step])

    @property
    def match_rates(self) -> list[float]:
        return [m / t if t else 0.0 for m, t in zip(self.matched, self.total)]

    @property
    def acceptance_rates(self) -> list[float]:
        return [a / t if t else 0.0 for a, t in zip(self.accepted, self.total)]


@dataclass
class StepOutcome:
    loss: torch.Tensor  # scalar, weighted over steps
    step_losses: list[float]
    acceptance: Acceptance


def _chunk_loss(head, student_hidden, teacher_hidden, target, temperature: float, ce_weight: float) -> torch.Tensor:
    """Summed over the chunk's rows: KL(main || head) of the softened distributions x T^2, plus the weighted
    cross-entropy on the main model's greedy token.  Student and teacher logits: [rows, V]."""
    student = head.logits(student_hidden).float()
    with torch.no_grad():
        teacher_log_probs = F.log_softmax(head.logits(teacher_hidden).float() / temperature, dim=-1)
    kl = F.kl_div(F.log_softmax(student / temperature, dim=-1), teacher_log_probs, log_target=True, reduction="sum")
    return kl * temperature**2 + ce_weight * F.cross_entropy(student, target, reduction="sum")


def chunked_step_loss(head, student_hidden, teacher_hidden, target, temperature: float, ce_weight: float) -> torch.Tensor:
    """One draft step's loss, averaged over its N rows ([N, H] hidden states, [N] targets), LOSS_CHUNK_ROWS
    rows at a time; each chunk's logits are recomputed in backward, so autograd keeps [N, H], not [N, V]."""
    chunks = zip(*(t.split(LOSS_CHUNK_ROWS) for t in (student_hidden, teacher_hidden, target)))
    total = sum(
        checkpoint(_chunk_loss, head, student, teacher, chunk_target, temperature, ce_weight, use_reentrant=False)
        for student, teacher, chunk_target in chunks
    )
    return total / student_hidden.shape[0]


def distill(
    head: MTPHead,
    batch: HeadBatch,
    weights: list[float] | None,
    temperature: float = 1.0,
    ce_weight: float = 0.0,
    steps: int | None = None,
) -> StepOutcome:
    """Forward KL(main || head) per step (temperature-softened, scaled by T^2), plus `ce_weight` times the
    cross-entropy on the main model's greedy next token.  `weights=None`: acceptance only (evaluation)."""
    steps = steps or len(weights)
    hiddens = chained_hidden(head, batch, steps)
    acceptance = Acceptance()
    still_accepted = batch.base_valid
    total = torch.zeros((), device=batch.bases.device)
    step_losses = []
    for step, student_hidden in enumerate(hiddens, start=1):
        valid = batch.step_valid(step)  # [B, M]
        rows = (batch.bases + step).clamp(max=batch.main_hidden.shape[1] - 1)  # [B, M]
        teacher_hidden = batch.main_hidden.gather(1, rows[..., None].expand(-1, -1, batch.main_hidden.shape[-1]))
        target = argmax_token(head, teacher_hidden)  # [B, M]
        matched = (argmax_token(head, student_hidden) == target) & valid
        still_accepted = still_accepted & matched
        acceptance.add(step - 1, int(matched.sum()), int(still_accepted.sum()), int(valid.sum()))
        if weights is None:
            continue
        if not valid.any():  # every page of the batch ended before this step
            step_losses.append(0.0)
            continue
        step_loss = chunked_step_loss(head, student_hidden[valid], teacher_hidden[valid], target[valid], temperature, ce_weight)
        total = total + weights[step - 1] * step_loss
        step_losses.append(float(step_loss.detach()))
    return StepOutcome(total, step_losses, acceptance)
