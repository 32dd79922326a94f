"""The model card's MTP head section: written once per folder, replaced by a later run, the card kept."""

from __future__ import annotations

from ocr_app.train_mtp.export import HEAD_SECTION, record_head_training


def test_head_record_replaces_the_earlier_one_and_keeps_the_card(tmp_path):
    (tmp_path / "README.md").write_text("# model\n\nHow the main weights were made.\n")
    record_head_training(tmp_path, ["first run"])
    record_head_training(tmp_path, ["second run"])
    card = (tmp_path / "README.md").read_text()
    assert card == f"# model\n\nHow the main weights were made.\n\n{HEAD_SECTION}\n\nsecond run\n"


def test_head_record_starts_a_card_where_there_is_none(tmp_path):
    record_head_training(tmp_path, ["a run"])
    assert (tmp_path / "README.md").read_text() == f"{HEAD_SECTION}\n\na run\n"
