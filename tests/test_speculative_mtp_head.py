"""The MTP head module: checkpoint layout, shared weights, pairing order, cache and training forwards."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file
from transformers import DynamicCache

from ocr_app.checkpoint import write_weight_index
from ocr_app.engines.hf import load_model_folder
from ocr_app.errors import ModelError
from ocr_app.speculative.mtp_head import load_mtp_head


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    _, model = load_model_folder(tiny_model_dir, torch.float32)
    return model, load_mtp_head(tiny_model_dir, model)


@pytest.fixture(scope="module")
def predictable(predictable_model_dir):
    _, model = load_model_folder(predictable_model_dir, torch.float32)
    return model, load_mtp_head(predictable_model_dir, model)


def text_positions(length: int) -> torch.Tensor:  # [3, 1, length]
    return torch.arange(length).view(1, 1, -1).expand(3, 1, -1)


def main_hidden(model, token_ids: torch.Tensor) -> torch.Tensor:  # [1, T] -> [1, T, H] after the final norm
    with torch.no_grad():
        return model.model.language_model(input_ids=token_ids).last_hidden_state


def test_head_holds_exactly_the_checkpoint_tensors(tiny, tiny_model_dir):
    _, head = tiny
    stored = {name.removeprefix("mtp."): tensor for name, tensor in load_file(tiny_model_dir / "mtp.safetensors").items()}
    state = head.state_dict()
    assert set(state) == set(stored)
    for name, tensor in stored.items():
        torch.testing.assert_close(state[name], tensor, rtol=0, atol=0)


def test_embedding_and_lm_head_are_the_main_models(tiny):
    model, head = tiny
    assert head.embed_tokens is model.model.language_model.embed_tokens
    assert head.lm_head is model.lm_head
    own = {id(p) for p in head.parameters()}
    assert id(model.lm_head.weight) not in own and id(head.embed_tokens.weight) not in own


def test_predictable_head_reads_the_embedding_of_the_next_token(predictable, predictable_model_dir):
    """The head's fc passes only the embedding half through: drafts come out as pi(x_{t+1}) only if
    the embedding comes first in cat([embedding, hidden]) and pairs are (h_t, x_{t+1})."""
    model, head = predictable
    permutation = torch.tensor(json.loads((predictable_model_dir / "next_token_permutation.json").read_text()))
    token_ids = torch.randint(10, permutation.numel(), (1, 40), generator=torch.Generator().manual_seed(0))
    hidden = main_hidden(model, token_ids)
    with torch.no_grad():
        logits = head.teacher_forced_logits(head.embed_tokens(token_ids), hidden, text_positions(40))  # [1, 39, V]
    assert torch.equal(logits.argmax(-1)[0], permutation[token_ids[0, 1:]])


def test_cached_steps_equal_the_teacher_forced_forward(tiny):
    model, head = tiny
    token_ids = torch.randint(10, 500, (1, 24), generator=torch.Generator().manual_seed(1))
    embeds, hidden, positions = head.embed_tokens(token_ids), main_hidden(model, token_ids), text_positions(24)
    with torch.no_grad():
        whole = head(embeds[:, 1:], hidden[:, :-1], positions[..., :-1])  # [1, 23, H]
        cache, pieces = DynamicCache(), []
        for start, stop in [(0, 10), (10, 11), (11, 14), (14, 23)]:
            pieces.append(head(embeds[:, 1 + start : 1 + stop], hidden[:, start:stop], positions[..., start:stop], cache))
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole, rtol=1e-4, atol=1e-5)


def test_teacher_forced_forward_trains_the_head_only(tiny):
    model, head = tiny
    token_ids = torch.randint(10, 500, (1, 16), generator=torch.Generator().manual_seed(2))
    logits = head.teacher_forced_logits(head.embed_tokens(token_ids).detach(), main_hidden(model, token_ids), text_positions(16))
    loss = torch.nn.functional.cross_entropy(logits[0, :-1], token_ids[0, 2:])
    loss.backward()
    try:
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())
    finally:
        head.zero_grad(set_to_none=True)
        model.zero_grad(set_to_none=True)


def test_folder_without_a_head_is_a_model_error(tiny, tiny_model_dir, tmp_path):
    model, _ = tiny
    folder = tmp_path / "headless"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "mtp.safetensors").unlink()
    write_weight_index(folder)
    with pytest.raises(ModelError, match="no MTP head"):
        load_mtp_head(folder, model)
