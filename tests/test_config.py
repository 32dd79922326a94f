"""Presets: validated on load, with a message that names the bad key."""

from __future__ import annotations

import pytest

from ocr_app.config import (
    FOLDER_PRESET_NAME,
    PROJECT_ROOT,
    default_model_name,
    drafts_for,
    load_mode_preset,
    load_model_preset,
)
from ocr_app.errors import ConfigError


def test_shipped_presets_load():
    model = load_model_preset(default_model_name())
    assert model.pixels.factor == 32
    for mode in ("low-latency", "bulk"):
        assert load_mode_preset(mode).name == mode
    assert load_mode_preset("low-latency").stream and not load_mode_preset("bulk").stream
    real = load_model_preset("qwen3.5-2b-ocr-tr")
    assert drafts_for(real, load_mode_preset("low-latency")) == 6


def test_a_bare_model_folder_is_read_as_the_real_model_and_a_tiny_one_with_its_own_preset(tmp_path, tiny_model_dir):
    bare = load_model_preset(tmp_path)  # a Hugging Face checkpoint as downloaded: no ocr_app.toml
    real = load_model_preset("qwen3.5-2b-ocr-tr")
    assert bare.resolved_path() == tmp_path.resolve() and bare.name == tmp_path.name
    assert (bare.prompt, bare.max_tokens, bare.pixels, bare.regions) == (real.prompt, real.max_tokens, real.pixels, None)
    tiny = load_model_preset(tiny_model_dir)
    assert tiny.resolved_path() == tiny_model_dir.resolve() and tiny.max_tokens == 64


def test_the_default_model_is_the_shipped_small_model():
    assert default_model_name() == "ocr-tiny-tr"
    assert load_model_preset(default_model_name()).resolved_path().joinpath("model.safetensors").is_file()


def test_model_folder_with_its_own_preset_is_read_as_trained(tmp_path):
    (tmp_path / FOLDER_PRESET_NAME).write_text('prompt = "Metni yaz."\nmax_tokens = 99\n[pixels]\nmin_pixels = 4096\nmax_pixels = 65536\n')
    preset = load_model_preset(tmp_path)
    assert (preset.prompt, preset.max_tokens, preset.pixels.max_pixels) == ("Metni yaz.", 99, 65536)
    assert preset.resolved_path() == tmp_path.resolve() and preset.name == tmp_path.name
    (tmp_path / FOLDER_PRESET_NAME).write_text('prompt = "p"\nmax_tokenz = 5\n[pixels]\nmin_pixels = 4096\nmax_pixels = 65536\n')
    with pytest.raises(ConfigError, match="bad key 'max_tokenz'"):
        load_model_preset(tmp_path)


def test_a_preset_naming_such_a_folder_starts_from_its_keys(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / FOLDER_PRESET_NAME).write_text('prompt = "Metni yaz."\nmax_tokens = 99\n[pixels]\nmin_pixels = 4096\nmax_pixels = 65536\n')
    (tmp_path / "mine.toml").write_text(f'path = "{model_dir}"\nmax_tokens = 7\n')
    preset = load_model_preset(tmp_path / "mine.toml")
    assert (preset.name, preset.prompt, preset.max_tokens, preset.pixels.max_pixels) == ("mine", "Metni yaz.", 7, 65536)


def test_relative_paths_are_relative_to_project_root():
    assert load_model_preset("tiny-random").resolved_path() == PROJECT_ROOT / "build" / "tiny-random"


def test_bad_key_is_named(tmp_path):
    preset = tmp_path / "bozuk.toml"
    preset.write_text('path = "x"\nprompt = "p"\nmax_tokenz = 5\n[pixels]\nmin_pixels = 1024\nmax_pixels = 4096\n')
    with pytest.raises(ConfigError, match="bad key 'max_tokenz'"):
        load_model_preset(preset)
    preset.write_text('path = "x"\nprompt = "p"\n[pixels]\nmin_pixels = 9000\nmax_pixels = 4096\n')
    with pytest.raises(ConfigError, match="bozuk.toml: bad key 'pixels'"):
        load_model_preset(preset)


def test_invalid_toml_and_unknown_names(tmp_path):
    broken = tmp_path / "kırık.toml"
    broken.write_text("path = ")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_model_preset(broken)
    with pytest.raises(ConfigError, match="unknown model 'yok'.*tiny-random"):
        load_model_preset("yok")
    with pytest.raises(ConfigError, match="unknown mode 'hızlı'"):
        load_mode_preset("hızlı")
