"""Model folder checks: the MTP head must be present, indexed, complete and of the right shapes."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig

from ocr_app.checkpoint import HEAD_FILE, INDEX_NAME, HeadStatus, inspect_mtp_head, write_weight_index
from ocr_app.engines.vllm import check_model_folder
from ocr_app.errors import ModelError


@pytest.fixture
def model_copy(tiny_model_dir, tmp_path):
    return shutil.copytree(tiny_model_dir, tmp_path / "model")


def text_config(model_dir):
    return AutoConfig.from_pretrained(model_dir).get_text_config()


def drop_head_from_index(model_dir):
    index_path = model_dir / INDEX_NAME
    index = json.loads(index_path.read_text())
    index["weight_map"] = {k: v for k, v in index["weight_map"].items() if not k.startswith("mtp.")}
    index_path.write_text(json.dumps(index))


def rewrite_head(model_dir, change):
    tensors = load_file(model_dir / HEAD_FILE)
    change(tensors)
    save_file(tensors, model_dir / HEAD_FILE)
    write_weight_index(model_dir)


def test_shipped_layout_is_usable(model_copy):
    report = inspect_mtp_head(model_copy, text_config(model_copy))
    assert report.status is HeadStatus.OK and report.usable


def test_missing_head_file(model_copy):
    (model_copy / HEAD_FILE).unlink()
    drop_head_from_index(model_copy)
    report = inspect_mtp_head(model_copy, text_config(model_copy))
    assert report.status is HeadStatus.MISSING and not report.usable


def test_head_not_listed_in_index(model_copy):
    drop_head_from_index(model_copy)
    report = inspect_mtp_head(model_copy, text_config(model_copy))
    assert report.status is HeadStatus.NOT_INDEXED
    assert "vLLM would skip the head" in report.message


def test_two_files_without_index(model_copy):
    (model_copy / INDEX_NAME).unlink()
    assert inspect_mtp_head(model_copy, text_config(model_copy)).status is HeadStatus.NOT_INDEXED


def test_head_missing_a_tensor(model_copy):
    rewrite_head(model_copy, lambda tensors: tensors.pop("mtp.fc.weight"))
    report = inspect_mtp_head(model_copy, text_config(model_copy))
    assert report.status is HeadStatus.INCOMPLETE and "mtp.fc.weight" in report.message


def test_head_tensor_of_wrong_shape(model_copy):
    def shrink(tensors):
        tensors["mtp.fc.weight"] = torch.zeros(tensors["mtp.fc.weight"].shape[0], 3)

    rewrite_head(model_copy, shrink)
    report = inspect_mtp_head(model_copy, text_config(model_copy))
    assert report.status is HeadStatus.WRONG_SHAPE and "mtp.fc.weight" in report.message


def test_unusable_head_is_an_error_with_drafts(model_copy):
    drop_head_from_index(model_copy)
    with pytest.raises(ModelError, match="does not list .* MTP head tensors"):
        check_model_folder(model_copy, drafts=3)


def test_unusable_head_is_a_note_without_drafts(model_copy, caplog):
    drop_head_from_index(model_copy)
    with caplog.at_level(logging.WARNING, logger="ocr_app.engines.vllm"):
        report = check_model_folder(model_copy, drafts=0)
    assert not report.usable
    assert "note:" in caplog.text and "reading without drafts" in caplog.text


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(ModelError, match="no config.json"):
        check_model_folder(tmp_path, drafts=0)
