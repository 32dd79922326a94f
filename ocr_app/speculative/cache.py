"""Rolling the hybrid Qwen3.5 cache back to the last accepted token after a verify pass.

A verify pass feeds K+1 tokens [x, d_1..d_K]; when n drafts are accepted the
cache must look as if only [x, d_1..d_n] had been fed:

* full-attention layers drop the last K-n keys/values (`DynamicLayer.crop`);
* Gated DeltaNet (linear-attention) layers carry a conv state (the last 3 inputs
  of the causal conv) and a recurrent state [B, heads, Dk, Dv] that every token
  overwrites, so they cannot be cropped after the fact.

Two strategies, both measured by `benchmarks/bench_hf_drafts.py`:

`RecordedStates` (the default) never re-runs a token.  The verify pass runs
with transformers' past-recording on, so the conv state keeps every input of
the pass and `crop(-(K-n))` cuts it back to the window that ends at the last
accepted token (transformers' own `LinearAttentionLayer.crop`).  The recurrent
state is recorded after every position: during the verify pass the gated delta
rule is run token by token with transformers' own single-token kernel
(`torch_recurrent_gated_delta_rule`, what plain decoding runs) and each
intermediate state is kept; rollback copies the state after position n in.
Cost: K+1 small state tensors per linear layer, and the recurrence runs as a
loop of K+1 steps instead of one chunked call (cheap for K+1 <= 8).  The
token-by-token rule is swapped into `modeling_qwen3_5` only for the duration
of a verify forward, so two decoders must not verify at once in one process.

`SnapshotRefeed` (the baseline) copies the linear states before the verify
pass; after a rejection it restores them, crops the attention layers by all
K+1 tokens and feeds the n+1 accepted tokens through the main model again.
That extra forward costs about as much as a verify pass on every round that
has a rejection, i.e. almost every round with a weak head.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from transformers import DynamicCache
from transformers.cache_utils import LinearAttentionCacheLayerMixin
from transformers.models.qwen3_5 import modeling_qwen3_5

Refeed = Callable[[int], None]  # feeds the first n tokens of the verify pass through the main model again


def linear_layers(cache: DynamicCache) -> list[LinearAttentionCacheLayerMixin]:
    return [layer for layer in cache.layers if isinstance(layer, LinearAttentionCacheLayerMixin)]


def attention_layers(cache: DynamicCache) -> list:
    return [layer for layer in cache.layers if not isinstance(layer, LinearAttentionCacheLayerMixin)]


class RecordedStates:
    name = "recorded"

    def __init__(self) -> None:
        self.per_position: list[torch.Tensor] = []  # one [B, T, Hv, Dk, Dv] per linear layer, in layer order

    def new_cache(self, model) -> DynamicCache:
        cache = DynamicCache(config=model.config)
        cache.activate_past_recording()
        return cache

    def after_prefill(self, cache: DynamicCache) -> None:
        cache.crop(0)  # recording kept the whole prompt's conv inputs; keep the last window only

    @contextmanager
    def verify_pass(self, cache: DynamicCache) -> Iterator[None]:
        self.per_position = []
        originals = modeling_qwen3_5.torch_chunk_gated_delta_rule, modeling_qwen3_5.torch_recurrent_gated_delta_rule
        recurrent = originals[1]

        def stepwise_rule(query, key, value, g, beta, initial_state=None, use_qk_l2norm_in_kernel=False, **_):
            # query/key: [B, T, H, Dk], value: [B, T, H, Dv], g/beta: [B, T, H]
            state, outputs, states = initial_state, [], []
            for t in range(query.shape[1]):
                step = slice(t, t + 1)
                out, state = recurrent(
                    query[:, step], key[:, step], value[:, step], g=g[:, step], beta=beta[:, step],
                    initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                )
                outputs.append(out)
                states.append(state)
            self.per_position.append(torch.stack(states, dim=1))  # [B, T, Hv, Dk, Dv]
            return torch.cat(outputs, dim=1), state

        modeling_qwen3_5.torch_chunk_gated_delta_rule = stepwise_rule
        modeling_qwen3_5.torch_recurrent_gated_delta_rule = stepwise_rule
        try:
            yield
        finally:
            modeling_qwen3_5.torch_chunk_gated_delta_rule, modeling_qwen3_5.torch_recurrent_gated_delta_rule = originals

    def keep(self, cache: DynamicCache, num_fed: int, num_kept: int, refeed: Refeed) -> None:
        cache.crop(num_kept - num_fed)  # attention KV and conv windows end at the last kept token
        for layer, states in zip(linear_layers(cache), self.per_position, strict=True):
            layer.recurrent_states[0].copy_(states[:, num_kept - 1])


class SnapshotRefeed:
    name = "refeed"

    def __init__(self) -> None:
        self.snapshot: list[tuple[torch.Tensor, torch.Tensor]] = []

    def new_cache(self, model) -> DynamicCache:
        return DynamicCache(config=model.config)

    def after_prefill(self, cache: DynamicCache) -> None:
        pass

    @contextmanager
    def verify_pass(self, cache: DynamicCache) -> Iterator[None]:
        self.snapshot = [
            (layer.conv_states[0].clone(), layer.recurrent_states[0].clone()) for layer in linear_layers(cache)
        ]
        yield

    def keep(self, cache: DynamicCache, num_fed: int, num_kept: int, refeed: Refeed) -> None:
        if num_kept == num_fed:
            return
        for layer, (conv, recurrent) in zip(linear_layers(cache), self.snapshot, strict=True):
            layer.conv_states[0].copy_(conv)
            layer.recurrent_states[0].copy_(recurrent)
        for layer in attention_layers(cache):
            layer.crop(-num_fed)
        refeed(num_kept)


ROLLBACKS = {"recorded": RecordedStates, "refeed": SnapshotRefeed}
