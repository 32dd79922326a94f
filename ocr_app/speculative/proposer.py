"""The proposer: K draft tokens per round from the MTP head, which keeps its own KV cache.

The head's cache holds one entry per main-model position t, for the pair
(h_t, x_{t+1}).  Each round first feeds the pairs the last verify pass made
final (the accepted tokens and the bonus, with the main model's hidden states),
then chains K-1 steps on its own output, one position further each step (as
vLLM's proposer: the temporal M-RoPE row + 1, copied to all three rows).  The
chained steps' cache entries are dropped at the start of the next round.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from ocr_app.speculative.mtp_head import MTPHead
from ocr_app.speculative.rejection_sampler import sampling_probs


class MTPProposer:
    def __init__(self, head: MTPHead, temperature: float, top_p: float, generator: torch.Generator | None):
        self.head = head
        self.temperature = temperature
        self.top_p = top_p
        self.generator = generator
        self.cache = DynamicCache()
        self.committed = 0  # head cache entries for verified pairs

    def _draft(self, head_hidden: torch.Tensor) -> tuple[int, torch.Tensor | None]:  # [H] -> token, q [V]
        logits = self.head.logits(head_hidden)  # [V]
        if self.temperature == 0:
            return int(logits.argmax()), None
        probs = sampling_probs(logits, self.temperature, self.top_p)
        return int(torch.multinomial(probs, 1, generator=self.generator)), probs

    def propose(
        self,
        next_embeds: torch.Tensor,  # [1, T, H] embeddings of x_{t+1} for the newly verified positions t
        hidden: torch.Tensor,  # [1, T, H] main model's h_t there
        position_ids: torch.Tensor,  # [3, 1, T] positions of h_t
        num_drafts: int,
    ) -> tuple[list[int], torch.Tensor | None]:  # K draft ids, q [K, V] (None when greedy)
        self.cache.crop(self.committed - self.cache.get_seq_length())
        head_hidden = self.head(next_embeds, hidden, position_ids, self.cache)[0, -1]  # [H]
        self.committed += next_embeds.shape[1]
        draft_ids, draft_probs = [], []
        position = position_ids[0, 0, -1]
        for step in range(num_drafts):
            draft, probs = self._draft(head_hidden)
            draft_ids.append(draft)
            draft_probs.append(probs)
            if step + 1 == num_drafts:
                break
            embeds = self.head.embed_tokens(torch.tensor([[draft]], device=hidden.device))  # [1, 1, H]
            step_positions = (position + step + 1).view(1, 1, 1).expand(3, 1, 1)  # [3, 1, 1]
            head_hidden = self.head(embeds, head_hidden.view(1, 1, -1), step_positions, self.cache)[0, -1]
        return draft_ids, (torch.stack(draft_probs) if self.temperature > 0 else None)
