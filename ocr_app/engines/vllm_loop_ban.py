"""`ban_loops` inside vLLM: a vLLM plugin (entry point group `vllm.general_plugins`, loaded by vLLM in every
process it starts) that lets a request ban repetition loops as the hf engine does.

vLLM's rejection sampler runs custom logits processors on the bonus token only, so a loop ban made as one
would not hold where drafts are verified, and the drafted text would differ.  Bad words are the one rule it
applies at every verified draft position and to the bonus token, each time with the output so far (the
accepted drafts before that position included): `vllm.v1.sample.ops.bad_words._apply_bad_words_single_batch`.
The plugin wraps that function: a request whose bad words begin with `LOOP_BAN` also has every token that
`repetition.loop_tokens` names for that output masked.  `LOOP_BAN` is one out-of-vocabulary id, which vLLM on
its own would apply as an empty slice: without the plugin a flagged request reads as an unflagged one, so
`VllmEngine` claims `bans_loops` only when the plugin is installed (`installed`).

The request carries the flag in `SamplingParams._bad_words_token_ids`, which vLLM fills from `bad_words`
strings and otherwise leaves as it is given (vLLM 0.32; `tests/test_vllm_engine.py` reads a looping page
through it with and without drafts).
"""

from __future__ import annotations

from importlib.metadata import entry_points

LOOP_BAN = [-1]
ENTRY_POINT_GROUP = "vllm.general_plugins"
ENTRY_POINT_NAME = "ocr_app_loop_ban"


def installed() -> bool:
    """Whether vLLM will load the plugin: the package was installed with its entry point."""
    return any(point.name == ENTRY_POINT_NAME for point in entry_points(group=ENTRY_POINT_GROUP))


def register() -> None:
    """The plugin: wrap vLLM's per-position bad-words rule once per process (vLLM may call this again)."""
    from vllm.v1.sample.ops import bad_words

    if getattr(bad_words._apply_bad_words_single_batch, "bans_loops", False):
        return
    bad_words._apply_bad_words_single_batch = _with_loop_ban(bad_words._apply_bad_words_single_batch)


def _with_loop_ban(apply_bad_words):
    from ocr_app.repetition import loop_tokens

    def apply(logits, bad_words_token_ids: list[list[int]], past_tokens_ids: list[int]) -> None:
        # logits: [V], one position of one request
        if bad_words_token_ids and bad_words_token_ids[0] == LOOP_BAN:
            banned = [token for token in loop_tokens(past_tokens_ids) if 0 <= token < logits.shape[0]]
            for token in banned:
                logits[token : token + 1] = float("-inf")  # a slice, as vLLM's own rule does: no device sync
            bad_words_token_ids = bad_words_token_ids[1:]
        apply_bad_words(logits, bad_words_token_ids, past_tokens_ids)

    apply.bans_loops = True
    return apply
