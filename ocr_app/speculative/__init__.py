"""Speculative decoding for the transformers engine with the checkpoint's own MTP head.

    mtp_head.py          the `mtp.*` head as a PyTorch module (drafting and teacher-forced training)
    proposer.py          drafts K tokens per round with the head, keeping the head's KV cache
    rejection_sampler.py accepts the longest prefix the main model agrees with, plus its bonus token
    cache.py             rolls the hybrid (attention + Gated DeltaNet) cache back to the last accepted token
    decoder.py           the loop: prefill, then propose -> verify -> accept -> roll back -> repeat
    batched.py           many sequences per forward (the hf engine's bulk reads), with and without drafts
    auto.py              `--drafts auto`: K from measured acceptance per position and measured round costs
    costs.py             times a verify pass over T tokens and a head step on this device
"""
