"""The vLLM loop-ban plugin's rule on one position's logits: the tokens `loop_tokens` names, and the request's
own bad words, masked only for a flagged request (vLLM reading with it: tests/test_vllm_engine.py)."""

from __future__ import annotations

import torch

from ocr_app.engines import vllm_loop_ban
from ocr_app.repetition import MIN_SPAN, loop_tokens

VOCAB = 32


def masked(bad_words: list[list[int]], past: list[int]) -> set[int]:
    from vllm.v1.sample.ops import bad_words as vllm_bad_words

    vllm_loop_ban.register()
    vllm_loop_ban.register()  # vLLM may load a plugin more than once: the rule must not wrap itself
    logits = torch.zeros(VOCAB)  # [V]
    vllm_bad_words._apply_bad_words_single_batch(logits, bad_words, past)
    return set(torch.nonzero(logits == float("-inf")).flatten().tolist())


def test_a_flagged_request_has_the_tokens_that_would_end_it_in_a_loop_masked():
    past = [9, 8] + [3] * (MIN_SPAN - 1)  # one more 3 makes a loop
    assert masked([vllm_loop_ban.LOOP_BAN], past) == loop_tokens(past) == {3}


def test_a_flagged_request_keeps_its_own_bad_words():
    assert masked([vllm_loop_ban.LOOP_BAN, [2, 7], [11]], [1, 2]) == {7, 11}  # no loop yet: only its own
    looping = [1, 2] + [5, 6] * 12  # [5, 6] repeated: 5 would make it loop
    assert masked([vllm_loop_ban.LOOP_BAN, [11]], looping) == {5, 11}


def test_an_unflagged_request_is_left_as_vllm_leaves_it():
    past = [3] * (MIN_SPAN - 1)
    assert masked([[4]], past) == {4}
    assert masked([[-1, 3]], past) == set()  # only the flag as a whole word asks for the ban


def test_the_plugin_is_installed_with_the_package():
    assert vllm_loop_ban.installed()
