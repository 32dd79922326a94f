"""ocr-train-ocr: the loss falls, a resumed run continues exactly, the export is a model folder the engines load."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoProcessor, Qwen3_5Config

from ocr_app.checkpoint import inspect_mtp_head
from ocr_app.config import FOLDER_PRESET_NAME, PROJECT_ROOT, RegionSplit, load_model_preset
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.engine_factory import make_engine
from ocr_app.errors import ConfigError
from ocr_app.synth import BENCHMARK_SEEDS, is_benchmark_seed, make_sample
from ocr_app.synth.text import SENTENCES
from ocr_app.train_ocr.config import Stage, load_train_config, parse_train_config
from ocr_app.train_ocr.data import (
    HELD_OUT_START, IGNORE_INDEX, Encoder, Example, draw_examples, encoded_batch, held_out_examples, sample_seeds,
    token_budget_groups,
)
from ocr_app.train_ocr.export import export_checkpoint, folder_preset
from ocr_app.train_ocr.trainer import (
    Budget, CtcHead, Trainer, checkpoint_config, load_checkpoint, train, word_start_masks,
)

SMALL_RECIPE = {
    "seed": 0,
    "threads": 2,
    "bf16": True,
    "prompt": "Metni yaz.",
    "characters": "çğıöşüÇĞİÖŞÜ",
    "log_every_steps": 1,
    "checkpoint_every_steps": 2,
    "model": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "layer_types": ["linear_attention", "full_attention"],
        "vision_depth": 1,
        "vision_hidden_size": 32,
        "vision_heads": 1,
        "vision_intermediate_size": 64,
    },
    "ctc": {"weight": 0.5},
    "optimizer": {"lr": 3e-3, "warmup_steps": 1, "ema_decay": 0.5},
    "evaluation": {"every_steps": 4, "samples_per_level": 2, "max_new_tokens": 8},
    "stages": [{"steps": 100, "levels": {"word": 1.0}, "batch_size": 4}],
}
STEPS = 4


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def train_losses(run_dir: Path) -> dict[int, float]:
    return {record["step"]: record["loss"] for record in metrics(run_dir) if "loss" in record}


@pytest.fixture(scope="module")
def uninterrupted_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("uninterrupted")
    train(parse_train_config(SMALL_RECIPE, "test"), run_dir, Budget(max_steps=STEPS))
    return run_dir


def test_loss_falls(uninterrupted_run):
    losses = train_losses(uninterrupted_run)
    assert sorted(losses) == list(range(1, STEPS + 1))
    assert losses[STEPS - 1] + losses[STEPS] < losses[1] + losses[2]
    (evaluation,) = [record for record in metrics(uninterrupted_run) if "cer_word" in record]
    assert evaluation["step"] == STEPS and evaluation["cer_word"] > 0


def test_ctc_head_reads_a_placed_line_as_its_crop():
    """Blank rows around a line leave its CTC frames as they are, once the head scores blank rows low."""
    torch.manual_seed(0)
    head = CtcHead(hidden_size=8, slots=2, vocab_size=5)
    line = torch.randn(1, 6, 8)  # [H=1, W=6, D]: one row of visual tokens holding text
    line[..., 0] = 1.0
    with torch.no_grad():
        head.row_score.weight.zero_()
        head.row_score.weight[0, 0] = 30.0  # text rows score high on feature 0; blank (zero) rows do not
    placed = torch.cat([torch.zeros(3, 6, 8), line, torch.zeros(4, 6, 8)])  # [H=8, W=6, D]
    assert head(line).shape == (12, 5)
    assert torch.allclose(head(placed), head(line), atol=1e-4)


def test_resumed_run_continues_where_it_stopped(uninterrupted_run, tmp_path):
    config = parse_train_config(SMALL_RECIPE, "test")
    first = train(config, tmp_path, Budget(max_steps=STEPS // 2))
    assert first.step == STEPS // 2
    # The second session is the CLI, with the checkpoint's own recipe.
    subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.train_ocr", "train", "--output", str(tmp_path), "--max-steps", str(STEPS)],
        cwd=PROJECT_ROOT, check=True, capture_output=True,
    )
    resumed, uninterrupted = train_losses(tmp_path), train_losses(uninterrupted_run)
    assert sorted(resumed) == list(range(1, STEPS + 1))
    for step in range(1, STEPS + 1):
        assert resumed[step] == pytest.approx(uninterrupted[step], rel=1e-4), step
    # The moving average survived the interruption too.
    resumed_ema = load_checkpoint(tmp_path / "checkpoint.pt")["ema"]
    for name, tensor in load_checkpoint(uninterrupted_run / "checkpoint.pt")["ema"].items():
        assert torch.allclose(resumed_ema[name].float(), tensor.float(), atol=1e-5), name


def test_resuming_with_another_average_decay_restarts_the_average(uninterrupted_run, tmp_path):
    checkpoint = load_checkpoint(uninterrupted_run / "checkpoint.pt")
    (tmp_path / "checkpoint.pt").write_bytes((uninterrupted_run / "checkpoint.pt").read_bytes())
    same = Trainer(parse_train_config(SMALL_RECIPE, "test"), tmp_path, command="test")
    same.resume()
    assert torch.equal(same.ema.module.lm_head.weight, checkpoint["ema"]["module.lm_head.weight"])
    assert not torch.equal(same.ema.module.lm_head.weight, same.model.lm_head.weight)
    recipe = {**SMALL_RECIPE, "optimizer": {**SMALL_RECIPE["optimizer"], "ema_decay": 0.9}}
    other = Trainer(parse_train_config(recipe, "test"), tmp_path, command="test")
    other.resume()
    assert torch.equal(other.ema.module.lm_head.weight, other.model.lm_head.weight)


def test_evaluate_command_reads_held_out_samples(uninterrupted_run):
    result = subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.train_ocr", "evaluate", "--output", str(uninterrupted_run),
         "--level", "word", "--level", "line", "--samples", "3"],
        cwd=PROJECT_ROOT, check=True, capture_output=True, text=True,
    )
    assert f"step {STEPS}: cer_word " in result.stdout and " cer_line " in result.stdout
    # Also measured on random words, which cannot be recited: greedy CER, loss with the own image and the gap to another's.
    for level in ("word", "line"):
        assert all(f" {name}_{level} " in result.stdout for name in ("cer_random", "random_loss", "random_gap"))


def test_data_workers_change_nothing(uninterrupted_run, tmp_path):
    config = parse_train_config({**SMALL_RECIPE, "data_workers": 2}, "test")
    train(config, tmp_path, Budget(max_steps=STEPS))
    with_workers, in_process = train_losses(tmp_path), train_losses(uninterrupted_run)
    assert sorted(with_workers) == list(range(1, STEPS + 1))
    for step in range(1, STEPS + 1):
        assert with_workers[step] == pytest.approx(in_process[step], rel=1e-4), step


def test_export_is_a_model_folder_the_engine_reads(uninterrupted_run, tmp_path):
    model_dir = export_checkpoint(uninterrupted_run / "checkpoint.pt", tmp_path / "ocr-tiny-test")
    preset = load_model_preset(str(model_dir))
    config = parse_train_config(SMALL_RECIPE, "test")
    assert inspect_mtp_head(model_dir, Qwen3_5Config.from_pretrained(model_dir).text_config).usable
    assert f"{STEPS} ({STEPS * 4} samples)" in (model_dir / "README.md").read_text()
    # The folder holds the moving average, not the last step's weights.
    checkpoint = load_checkpoint(uninterrupted_run / "checkpoint.pt")
    shipped = load_file(model_dir / "model.safetensors")
    name = "model.language_model.layers.1.mlp.up_proj.weight"
    assert torch.equal(shipped[name], checkpoint["ema"][f"module.{name}"].to(torch.bfloat16))
    assert not torch.equal(shipped[name], checkpoint["model"][name].to(torch.bfloat16))
    # The folder carries the prompt and pixel budget it was trained with.
    assert preset.prompt == config.prompt and preset.path == model_dir.resolve()
    assert (preset.pixels.min_pixels, preset.pixels.max_pixels) == (config.model.min_pixels, config.model.max_pixels)
    engine = make_engine("hf", preset.model_copy(update={"max_tokens": 4}))
    page = engine.read(make_sample(0, "word").image, GenerationSettings(max_tokens=4))
    assert 0 < page.metrics.output_tokens <= 4


def test_the_recipes_regions_reach_the_exported_folders_preset(tmp_path):
    every_key = {"max_height": 64, "margin": 12, "crop_columns": True, "text_height": 24}
    for regions, expected in (
        (None, None),
        ({"max_height": 64, "margin": 12}, RegionSplit(max_height=64, margin=12)),
        (every_key, RegionSplit(**every_key)),
    ):
        recipe = {**SMALL_RECIPE, "regions": regions} if regions else SMALL_RECIPE
        folder = tmp_path / str(len(regions or {}))
        folder.mkdir()
        (folder / FOLDER_PRESET_NAME).write_text(folder_preset(parse_train_config(recipe, "test")), encoding="utf-8")
        assert load_model_preset(str(folder)).regions == expected


def test_export_can_read_pages_as_another_recipes_regions(uninterrupted_run, tmp_path):
    # A page reading measured better than the run's own ships without retraining; the card says whose it is.
    recipe = PROJECT_ROOT / "configs" / "train_ocr.toml"
    model_dir = export_checkpoint(uninterrupted_run / "checkpoint.pt", tmp_path / "exported", regions_from=recipe)
    assert parse_train_config(SMALL_RECIPE, "test").regions is None
    assert load_model_preset(str(model_dir)).regions == load_train_config(recipe).regions
    assert f"`{recipe}`'s, not the training recipe's" in (model_dir / "README.md").read_text()


def test_warm_start_continues_from_an_exported_model(uninterrupted_run, tmp_path):
    model_dir = export_checkpoint(uninterrupted_run / "checkpoint.pt", tmp_path / "exported")
    config = parse_train_config(SMALL_RECIPE, "test")
    state = train(config, tmp_path / "continued", Budget(max_steps=STEPS + 2), warm_start=model_dir)
    losses, first_run = train_losses(tmp_path / "continued"), train_losses(uninterrupted_run)
    assert sorted(losses) == [STEPS + 1, STEPS + 2]
    assert state.data_position == (STEPS + 2) * 4 and len(state.sessions) == 2
    # The weights came along: the continued run starts near where the first one ended, not at a fresh model's loss.
    assert losses[STEPS + 1] < first_run[1]


def test_a_small_step_moves_every_stacks_weights(tmp_path):
    # Adam's weights are fp32 under bf16 autocast: a step at a low rate moves the decoder's weights too (as bf16
    # weights, most of such an update was rounded away and the decoder barely trained when the rate fell).
    recipe = parse_train_config({**SMALL_RECIPE, "optimizer": {"lr": 1e-5, "warmup_steps": 1, "ema_decay": 0.5}}, "test")
    trainer = Trainer(recipe, tmp_path, command="test")
    assert {parameter.dtype for parameter in trainer.model.parameters()} == {torch.float32}
    names = ("model.language_model.layers.1.self_attn.o_proj.weight", "model.visual.blocks.0.attn.proj.weight")
    before = {name: trainer.model.state_dict()[name].clone() for name in names}
    stage = Stage(steps=1, levels={"word": 1.0}, batch_size=4)
    trainer.train_step(trainer.encoder.micro_batches(draw_examples(0, 4, stage), 0))
    for name in names:
        assert (trainer.model.state_dict()[name] != before[name]).float().mean() > 0.9, name


def test_bf16_autocast_only_where_the_cpu_computes_bf16(tmp_path):
    # The recipe asks for bf16 autocast; where the CPU only emulates bf16 (AVX2) a step would take ~18x as long.
    trainer = Trainer(parse_train_config(SMALL_RECIPE, "test"), tmp_path, command="test")
    assert trainer.config.bf16
    with trainer.autocast():
        product = torch.nn.functional.linear(torch.ones(2, 8), torch.ones(4, 8))
    assert product.dtype == (torch.bfloat16 if torch.ops.mkldnn._is_mkldnn_bf16_supported() else torch.float32)


def test_warm_start_refuses_a_folder_without_training_state(tmp_path):
    config = parse_train_config(SMALL_RECIPE, "test")
    with pytest.raises(ConfigError, match="training_state.json"):
        train(config, tmp_path / "run", Budget(max_steps=1), warm_start=tmp_path)


def test_training_and_held_out_seeds_avoid_the_benchmark():
    below = BENCHMARK_SEEDS.start - 3
    seeds = sample_seeds(below, 6)
    assert seeds[:3] == [below, below + 1, below + 2]
    assert seeds[3] == BENCHMARK_SEEDS.stop
    assert not any(is_benchmark_seed(seed) for seed in seeds + sample_seeds(HELD_OUT_START, 100))


def test_shipped_recipe_is_valid():
    config = load_train_config(PROJECT_ROOT / "configs" / "train_ocr.toml")
    preset = load_model_preset("ocr-tiny-tr")
    assert preset.prompt == config.prompt
    assert (preset.pixels.min_pixels, preset.pixels.max_pixels) == (config.model.min_pixels, config.model.max_pixels)
    # The shipped folder reads pages as the recipe cuts training's parts (`make release-ocr-tiny`).
    assert preset.regions == config.regions
    layer_types = set(config.model.layer_types)
    assert layer_types == {"linear_attention", "full_attention"}
    assert config.model.linear_key_head_dim == 128


def test_a_stage_without_random_text_draws_the_samples_it_always_drew():
    stage = Stage(steps=1, levels={"line": 1.0}, batch_size=6)
    stock = draw_examples(100, 6, stage)

    def drawn_before_random_text(seed: int) -> str:
        rng = random.Random(seed)
        rng.choices(["line"], weights=[1.0])
        return make_sample(rng, "line").markdown

    assert [example.text for example in stock] == [drawn_before_random_text(seed) for seed in sample_seeds(100, 6)]
    random_words = draw_examples(100, 6, stage.model_copy(update={"random_text": 1.0}))
    assert not any(example.text in " ".join(SENTENCES) for example in random_words)


def test_history_noise_swaps_only_answer_inputs_and_is_the_same_on_resume(uninterrupted_run):
    encoder = Encoder(AutoProcessor.from_pretrained(uninterrupted_run / "processor"), SMALL_RECIPE["prompt"])
    stage = Stage(steps=1, levels={"line": 1.0}, batch_size=6, random_text=1.0)
    noisy_stage = stage.model_copy(update={"history_noise": 0.3})
    clean, noisy, again = (encoded_batch(encoder, 100, s, 4096) for s in (stage, noisy_stage, noisy_stage))
    swapped = answers = 0
    for clean_micro, noisy_micro, again_micro in zip(clean.micro_batches, noisy.micro_batches, again.micro_batches):
        clean_ids, noisy_ids = clean_micro.inputs["input_ids"], noisy_micro.inputs["input_ids"]
        labels = clean_micro.inputs["labels"]
        assert torch.equal(noisy_micro.inputs["labels"], labels)
        assert torch.equal(noisy_ids, again_micro.inputs["input_ids"])
        changed, answer = noisy_ids != clean_ids, labels != IGNORE_INDEX
        assert not (changed & ~answer).any()  # the prompt and the image tokens are never touched
        assert set(noisy_ids[changed].tolist()) <= set(labels[answer].tolist())
        swapped += int(changed.sum())
        answers += int(answer.sum())
    assert 0.15 < swapped / answers < 0.4  # 0.3 drawn; a swap may draw the token it replaces


def test_reliance_compares_each_answer_with_its_own_image_and_another(uninterrupted_run):
    checkpoint = uninterrupted_run / "checkpoint.pt"
    trainer = Trainer(checkpoint_config(load_checkpoint(checkpoint), str(checkpoint)), uninterrupted_run, command="test")
    trainer.resume()
    examples = held_out_examples("word", 3)
    own, other = trainer.image_reliance(examples)
    assert own != other
    # With one image for all answers, "another sample's image" is the same image: no gap.
    same_image = [Example(examples[0].image, example.text, example.level) for example in examples]
    assert trainer.image_reliance(same_image)[0] == pytest.approx(trainer.image_reliance(same_image)[1])
    first, later = trainer.word_start_losses(held_out_examples("line", 3, random_text=True))
    assert first > 0 and later > 0
    result = subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.train_ocr", "reliance", "--output", str(uninterrupted_run),
         "--level", "paragraph"], cwd=PROJECT_ROOT, capture_output=True, text=True,
    )
    assert result.returncode != 0 and "unknown level(s) paragraph" in result.stderr and "Traceback" not in result.stderr


def test_word_start_masks_mark_the_first_letter_of_each_word():
    space, ignored = 9, -100
    # A prompt of two tokens, then the answer "ab cd e" (a=1, b=2, c=3, d=4, e=5) and <|im_end|> (7).
    labels = torch.tensor([[ignored, ignored, 1, 2, space, 3, 4, space, 5, 7]])
    first, later = word_start_masks(labels, space)
    targets = labels[:, 1:]
    assert targets[first].tolist() == [1]
    assert targets[later].tolist() == [3, 5]


def test_token_budget_groups_pack_like_lengths_under_the_budget():
    lengths = [300, 40, 60, 50, 900, 45]
    groups = token_budget_groups(lengths, max_tokens=200)
    assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
    assert groups == [[1, 5, 3], [2], [0], [4]]  # 3 x 50 fits, 4 x 60 does not; 900 goes alone
    assert token_budget_groups(lengths, max_tokens=0) == [list(range(len(lengths)))]


def test_micro_batches_give_the_whole_batch_gradient(tmp_path):
    """Cutting a step into micro-batches changes its speed, not the losses or the gradient (fp32).

    Not to the last bit: transformers' PyTorch fallback of the gated delta rule lets right padding shift
    the real positions a little (the loss of one word moves by 1e-5 relative with 30 pad tokens, not at
    all with full attention only), and the gradients of differently padded batches differ by ~0.5%.  A
    wrong normalisation of the micro-batches' losses would be off by tens of percent.
    """
    recipe = parse_train_config({**SMALL_RECIPE, "bf16": False}, "test")
    stage = Stage(steps=1, levels={"word": 0.5, "line": 0.5}, batch_size=6)
    examples = draw_examples(0, stage.batch_size, stage)
    results = []
    for max_tokens in (0, 120):
        trainer = Trainer(recipe, tmp_path / str(max_tokens), command="test")
        batch = trainer.encoder.micro_batches(examples, max_tokens)
        losses = trainer.accumulate_gradients(batch)
        gradient = torch.cat([parameter.grad.flatten() for parameter in trainer.model.parameters() if parameter.grad is not None])
        results.append((len(batch.micro_batches), losses, gradient))
    (whole_count, whole_losses, whole_gradient), (micro_count, micro_losses, micro_gradient) = results
    assert whole_count == 1 and micro_count > 2
    assert micro_losses == pytest.approx(whole_losses, rel=1e-4)
    assert ((micro_gradient - whole_gradient).norm() / whole_gradient.norm()).item() < 0.02


def test_band_stages_train_on_bands_at_their_stages_learning_rate(tmp_path):
    regions = {"max_height": 32, "margin": 16, "crop_columns": True, "cut_between_lines": True, "text_height": 19}
    recipe = {
        **SMALL_RECIPE,
        "regions": regions,
        "evaluation": {"every_steps": 100, "samples_per_level": 2, "max_new_tokens": 8},
        "stages": [
            {"steps": 1, "levels": {"word": 1.0}, "batch_size": 2},
            {"steps": 2, "levels": {"band": 1.0}, "batch_size": 2, "lr_scale": 0.25, "random_text": 1.0},
        ],
    }
    train(parse_train_config(recipe, "test"), tmp_path, Budget(max_steps=3))
    records = [record for record in metrics(tmp_path) if "loss" in record]
    assert [record["lr"] for record in records] == pytest.approx([3e-3, 7.5e-4, 7.5e-4])
    assert all(record["loss"] > 0 for record in records)
    with pytest.raises(ConfigError, match="regions"):
        parse_train_config({**recipe, "regions": None}, "test")
