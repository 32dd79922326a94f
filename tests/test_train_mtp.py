"""ocr-train-mtp on the tiny random model: the chained training pass drafts exactly as the decoder's
proposer does, a fresh head learns the model's own outputs, the main weights never change, and a
killed run resumes to the same head."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pymupdf
import pytest
import torch
from PIL import Image, ImageDraw
from safetensors.torch import load_file, save_file

from ocr_app.checkpoint import HEAD_FILE, HEAD_PREFIX, INDEX_NAME, expected_head_shapes, inspect_mtp_head
from ocr_app.config import RegionSplit, load_model_preset
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.engines.hf import HFEngine
from ocr_app.errors import ConfigError
from ocr_app.speculative.mtp_head import load_mtp_head
from ocr_app.speculative.proposer import MTPProposer
from ocr_app.train_mtp.config import load_train_config
from ocr_app.regions import split_page
from ocr_app.train_mtp.data import BAND_MARK, ReadCache, band_refs, document_pages, read_pages, render_page, split_pages
from ocr_app.train_mtp.distill import chained_logits, make_batch
from ocr_app.train_mtp.export import file_sha256, prepare_output
from ocr_app.train_mtp.head_init import fresh_head, head_state
from ocr_app.train_mtp.loop import Trainer, total_steps
from ocr_app.train_mtp.run import Callbacks, TrainJob, pages_to_train, prepare
from ocr_app.train_mtp.teacher import Teacher
from tests.conftest import PROJECT_ROOT, SAMPLE_PDF
from tests.vllm_support import VLLM_TEST_ENV

WORDS = "fatura tarih toplam müşteri ürün miktar fiyat tutar kdv genel sayın ilgili başvuru".split()


def write_documents(folder: Path, images: int) -> Path:
    """Small scanned-looking pages (PNG) and one three-page PDF, all different."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(images):
        rng = random.Random(i)
        image = Image.new("RGB", (160, 128), "white")
        draw = ImageDraw.Draw(image)
        for line in range(5):
            draw.text((4, 4 + 24 * line), " ".join(rng.choice(WORDS) for _ in range(3)), fill="black")
        image.save(folder / f"page{i:03d}.png")
    pdf = pymupdf.open()
    for i in range(3):
        pdf.new_page(width=72, height=60).insert_text((5, 20), f"Fatura {i}", fontsize=9)
    pdf.save(folder / "letters.pdf")
    return folder


@pytest.fixture
def one_thread():
    """The test machine's cores are shared: one torch thread is several times faster than contended ones."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def short_preset(tiny_model_dir):
    return load_model_preset(tiny_model_dir).model_copy(update={"max_tokens": 12})


@pytest.fixture(scope="module")
def teacher(short_preset):
    return Teacher(HFEngine(short_preset), torch.device("cpu"))


@pytest.fixture(scope="module")
def read_examples(tmp_path_factory, short_preset, teacher):
    """Four pages read once by the main model through the read cache: three images and a PDF page
    of another size, so prompts differ in length."""
    docs = write_documents(tmp_path_factory.mktemp("docs"), images=3)
    refs, problems = document_pages(docs)
    assert not problems
    refs = refs[:4]
    cache = ReadCache(tmp_path_factory.mktemp("cache"), {"prompt": teacher.engine.prompt})
    settings = GenerationSettings(max_tokens=short_preset.max_tokens)
    assert read_pages(refs, teacher.engine, settings, cache, teacher.engine.prompt, short_preset.pixels, 200) == []
    return [(ref, cache.reads[ref.page_id]) for ref in refs]


def test_chained_pass_drafts_what_the_proposer_drafts(one_thread, teacher, short_preset, read_examples, tiny_model_dir):
    """Every base of the parallel training pass gets the same K drafts as the decoder's proposer
    would make from that point (random head: arbitrary tokens, so agreement is no accident)."""
    steps = 5
    head = load_mtp_head(tiny_model_dir, teacher.model)
    ref, read = read_examples[0]
    page = teacher.page_pass(render_page(ref, short_preset.pixels, 200), read.token_ids)
    batch = make_batch([page], None, None, torch.float32)
    with torch.no_grad():
        drafts = torch.stack([logits.argmax(-1)[0] for logits in chained_logits(head, batch, steps)], dim=1)  # [M, K]
        for row, base in enumerate(batch.bases[0].tolist()):
            proposer = MTPProposer(head, temperature=0.0, top_p=1.0, generator=None)
            proposed, _ = proposer.propose(
                page.embeds[None, 1 : base + 2], page.hidden[None, : base + 1], page.positions[:, None, : base + 1], steps
            )
            assert drafts[row].tolist() == proposed, f"base {base}"
    assert batch.bases.shape[1] == len(read.token_ids)  # one chain per output position (L-1 .. T-2)


def test_padded_batch_drafts_as_each_page_alone(one_thread, teacher, short_preset, read_examples, tiny_model_dir):
    head = load_mtp_head(tiny_model_dir, teacher.model)
    pages = [teacher.page_pass(render_page(ref, short_preset.pixels, 200), read.token_ids) for ref, read in read_examples]
    assert len({page.prompt_len for page in pages}) > 1  # padding is exercised
    with torch.no_grad():
        together = chained_logits(head, make_batch(pages, None, None, torch.float32), 3)
        for i, page in enumerate(pages):
            alone = chained_logits(head, make_batch([page], None, None, torch.float32), 3)
            count = alone[0].shape[1]
            for step in range(3):
                torch.testing.assert_close(together[step][i, :count], alone[step][0], rtol=1e-4, atol=1e-4)


def test_fresh_head_is_identity_normed_and_exports_in_checkpoint_layout(teacher):
    head = fresh_head(teacher.model, seed=0)
    state = head_state(head)
    assert {name: tuple(t.shape) for name, t in state.items()} == expected_head_shapes(teacher.model.config.text_config)
    assert all(not tensor.any() for name, tensor in state.items() if "norm" in name)
    assert state["mtp.fc.weight"].std() > 0


def test_output_folder_never_overwrites_the_input(tiny_model_dir):
    with pytest.raises(ConfigError, match="--in-place"):
        prepare_output(tiny_model_dir, tiny_model_dir)


def test_resumed_run_ends_with_the_same_head(one_thread, tmp_path, teacher, short_preset, read_examples):
    """Train 4 steps straight, and 2 steps + checkpoint + a new process's worth of objects + 2 more."""
    config = load_train_config(None, max_steps=4, batch_size=2, grad_accum=1, learning_rate=3e-3, checkpoint_every=2, warmup_steps=0)

    def trainer(work_dir: Path) -> Trainer:
        work_dir.mkdir(exist_ok=True)
        head = fresh_head(teacher.model, seed=0)
        return Trainer(config, teacher, head, read_examples, short_preset.pixels, 200, work_dir)

    straight = trainer(tmp_path / "straight")
    straight.run()
    killed = trainer(tmp_path / "killed")
    killed.train_step(), killed.train_step()
    killed.save_checkpoint()
    killed.train_step()  # lost with the process
    resumed = trainer(tmp_path / "killed")
    assert resumed.resume() and resumed.step == 2
    resumed.run()
    for name, tensor in straight.head.state_dict().items():
        assert torch.equal(tensor, resumed.head.state_dict()[name]), name
    assert not torch.equal(straight.head.fc.weight, fresh_head(teacher.model, seed=0).fc.weight)
    assert all(parameter.grad is None for parameter in teacher.model.parameters())  # embeddings, lm_head: frozen
    logged = [json.loads(line)["step"] for line in (tmp_path / "killed" / "train_log.jsonl").read_text().splitlines()]
    assert logged == [1, 2, 3, 4]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(PROJECT_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.train_mtp", *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True
    )


def test_bad_setting_is_one_line(tiny_model_dir, tmp_path):
    result = run_cli("--model", str(tiny_model_dir), "--data", str(tmp_path), "--output", str(tmp_path / "o"), "--draft-steps", "9")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "draft_steps" in result.stderr


def test_fresh_head_learns_the_models_outputs_and_ships_beside_unchanged_weights(tiny_model_dir, tmp_path):
    docs = write_documents(tmp_path / "docs", images=30)
    output = tmp_path / "trained"
    main_hash = file_sha256(tiny_model_dir / "model.safetensors")
    common = ["--model", str(tiny_model_dir), "--data", str(docs), "--max-tokens", "16", "--eval-fraction", "0.15"]
    result = run_cli(
        *common, "--output", str(output), "--init", "fresh", "--max-steps", "15",
        "--batch-size", "2", "--grad-accum", "1", "--lr", "3e-3",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    before, after = json.loads((tmp_path / "trained.mtp-work" / "eval.json").read_text())
    assert before["pages"] >= 4 and before["identical_pages"] == after["identical_pages"] == before["pages"]
    # Measured: fresh head 0% at every position; after 15 steps 100% teacher-forced and decoded.
    for position in range(3):
        assert before["teacher_forced_acceptance"][position] < 0.05
        assert before["decoding"]["acceptance_rate_per_position"][position] < 0.05
        assert after["teacher_forced_acceptance"][position] > 0.8
        assert after["decoding"]["acceptance_rate_per_position"][position] > 0.8
    assert after["decoding"]["mean_acceptance_length"] > before["decoding"]["mean_acceptance_length"] + 2

    # The main weights are byte-identical, in the input and in the copy; the index lists the new head.
    assert file_sha256(tiny_model_dir / "model.safetensors") == main_hash == file_sha256(output / "model.safetensors")
    weight_map = json.loads((output / INDEX_NAME).read_text())["weight_map"]
    text_config = json.loads((output / "config.json").read_text())
    head_names = {name for name in weight_map if name.startswith(HEAD_PREFIX)}
    assert head_names and all(weight_map[name] == HEAD_FILE for name in head_names)
    assert all(shard == "model.safetensors" for name, shard in weight_map.items() if name not in head_names)
    preset = load_model_preset(output)
    engine = HFEngine(preset)
    assert inspect_mtp_head(output, engine.model.config.text_config).usable
    assert head_names == set(expected_head_shapes(engine.model.config.text_config))
    assert (output / "tokenizer.json").exists() and text_config["model_type"] == "qwen3_5"

    # The model card records how the head was made and the acceptance it measured.
    card = (output / "README.md").read_text()
    after_rates = " ".join(f"{rate:.2f}" for rate in after["decoding"]["acceptance_rate_per_position"])
    assert card.count("## MTP head") == 1 and "--init fresh --max-steps 15" in card
    assert f"acceptance per draft position {after_rates}" in card and "15 optimizer steps" in card

    # A second look reuses the read cache and compares the input's head with the trained one.
    result = run_cli(*common, "--output", str(output), "--eval-only", "--eval-pages", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "reading" not in result.stderr
    assert "input head -> output head" in result.stdout

    # vLLM loads the trained head (mtp.safetensors, found through the index) and drafts better with it.
    assert vllm_acceptance(output, tmp_path) > vllm_acceptance(tiny_model_dir, tmp_path) + 0.5


def vllm_acceptance(model_dir: Path, tmp_path: Path) -> float:
    """Mean per-position acceptance of 3 drafts when vLLM reads one sample page with this model's head."""
    out = tmp_path / f"{model_dir.name}-vllm.json"
    done = subprocess.run(
        [sys.executable, "-m", "ocr_app.cli.read", str(SAMPLE_PDF), "--pages", "1", "--engine", "vllm",
         "--model", str(model_dir), "--drafts", "3", "--max-tokens", "16", "--format", "json", "-o", str(out)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **VLLM_TEST_ENV},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rates = json.loads(out.read_text())["pages"][0]["metrics"]["spec"]["acceptance_rate_per_position"]
    return sum(rates) / len(rates)


def test_reads_of_other_main_weights_are_never_reused(tiny_model_dir, tmp_path):
    """Retraining the main model in the same folder changes its readings: the old read cache is refused."""
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model_dir)
    docs = write_documents(tmp_path / "docs", images=2)
    common = ["--model", str(model_dir), "--data", str(docs), "--output", str(tmp_path / "o"), "--eval-only",
              "--max-tokens", "4", "--work-dir", str(tmp_path / "work")]  # fmt: skip
    assert run_cli(*common).returncode == 0
    weights = load_file(model_dir / "model.safetensors")
    name = next(iter(weights))
    weights[name] = weights[name] + 1
    save_file(weights, model_dir / "model.safetensors", metadata={"format": "pt"})

    result = run_cli(*common)
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "(weights)" in result.stderr and "--work-dir" in result.stderr


def test_a_model_that_reads_bands_learns_from_its_bands(tmp_path, short_preset):
    """The head drafts on what the model reads: for a model with `regions`, each band of a page is an example,
    rendered as the engine cuts it, and the bands of one page stay on one side of the held-out split."""
    refs, _ = document_pages(write_documents(tmp_path / "docs", images=4))
    regions = RegionSplit(max_height=32, margin=4)
    bands, problems = band_refs(refs, regions, short_preset.pixels, 200)
    assert not problems
    for ref in refs:
        expected = split_page(render_page(ref, short_preset.pixels, 200), regions, short_preset.pixels)
        own = [band for band in bands if band.page_id.rsplit(BAND_MARK, 1)[0] == ref.page_id]
        assert len(own) == len(expected)
        assert all(render_page(band, short_preset.pixels, 200).tobytes() == image.tobytes() for band, image in zip(own, expected))
    assert len(bands) > len(refs)
    train, held_out = split_pages(bands, 0.3, seed=0)
    pages = [{band.page_id.rsplit(BAND_MARK, 1)[0] for band in side} for side in (train, held_out)]
    assert held_out and not pages[0] & pages[1]


def test_a_run_ended_by_max_steps_reads_only_the_pages_its_steps_reach(tmp_path, tiny_preset):
    """A release's head (`HEAD_STEPS=700`, 4 bands a step) trains on ~2 800 of ~8 900 bands: only those are
    read.  The share is seeded, so a resumed run learns from the same pages, and its steps are those asked for."""
    docs = write_documents(tmp_path / "docs", images=40)
    config = load_train_config(None, max_steps=5, batch_size=2, grad_accum=2, epochs=1, eval_pages=3)
    job = TrainJob(tiny_preset.model_copy(update={"max_tokens": 2}), tmp_path / "o", config, docs, work_dir=tmp_path / "w")
    prepared = prepare(job, Callbacks())
    assert len(prepared.train) == 20 and 1 <= len(prepared.held_out) <= 3
    reads = (tmp_path / "w" / "reads" / "reads.jsonl").read_text().splitlines()
    assert len(reads) == 20 + len(prepared.held_out)  # of 43 pages
    assert total_steps(config, len(prepared.train)) == 5
    refs, _ = document_pages(docs)
    assert [ref.page_id for ref, _ in prepared.train] == [ref.page_id for ref in pages_to_train(split_pages(refs, config.eval_fraction, config.seed)[0], config)]
    two_epochs = config.model_copy(update={"epochs": 2})
    assert len(pages_to_train(refs, two_epochs)) == 10 and total_steps(two_epochs, 10) == 5
    unlimited = config.model_copy(update={"max_steps": None})
    assert pages_to_train(refs, unlimited) == refs
