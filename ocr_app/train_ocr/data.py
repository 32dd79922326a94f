"""Batches for OCR training: synthetic images and their text, encoded as the engines encode a page.

The data is a pure function of the data position (how many samples came
before): sample n uses the n-th training seed of `ocr_app.synth`, which never
touches the benchmark's reserved seeds.  A resumed run therefore sees exactly
the samples an uninterrupted one would have seen.  Besides the synthetic levels,
`real` draws a part of a page of the real-PDF corpus (`corpus`, `textlayer`):
its training documents for training, its held-out ones for evaluation; `layout`
a part of a page of an HTML document laid out as a PDF (`synth.story`).
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
from PIL import Image
from transformers import AutoProcessor

from ocr_app.config import PixelBudget, RegionSplit
from ocr_app.prompts import page_messages
from ocr_app.synth import DEGRADATION_WEIGHTS, check_training_seeds, make_sample, training_seeds
from ocr_app.train_ocr.config import LAYOUT, REAL, TRAIN_LEVELS, Stage
from ocr_app.train_ocr.corpus import corpus_pages
from ocr_app.train_ocr.textlayer import layout_sample, part_sample

IGNORE_INDEX = -100
# Held-out samples come from seeds far above any data position a run reaches, still outside the benchmark's range.
HELD_OUT_START = 2**41
# Layout samples of this many consecutive seeds share one HTML document (one batch's, mostly): laying it out,
# rendering and cutting it costs ~0.5 s, a part of it ~10 ms.
LAYOUT_SEEDS_PER_DOCUMENT = 16


@dataclass(frozen=True)
class Example:
    image: Image.Image
    text: str
    level: str


def sample_seeds(start: int, count: int) -> list[int]:
    """The synth seeds of samples start .. start+count-1: training seeds only, checked."""
    seeds = list(itertools.islice(training_seeds(start), count))
    check_training_seeds(seeds)
    return seeds


@lru_cache(maxsize=2)
def _real_pages(held_out: bool) -> list[tuple[Path, int]]:
    return corpus_pages(held_out)


def real_example(rng: random.Random, regions: RegionSplit, budget: PixelBudget, held_out: bool = False) -> Example:
    """A part of a page of the real-PDF corpus (its training or its held-out documents), with the damage of a
    degradation drawn as the synthetic samples draw theirs."""
    degradation = rng.choices(list(DEGRADATION_WEIGHTS), weights=list(DEGRADATION_WEIGHTS.values()))[0]
    image, text = part_sample(rng, _real_pages(held_out), budget, regions, degradation)
    return Example(image, text, REAL)


def layout_example(seed: int, rng: random.Random, regions: RegionSplit, budget: PixelBudget) -> Example:
    """A part of a page of the HTML document of the seed's group (`LAYOUT_SEEDS_PER_DOCUMENT`), damaged as above."""
    degradation = rng.choices(list(DEGRADATION_WEIGHTS), weights=list(DEGRADATION_WEIGHTS.values()))[0]
    image, text = layout_sample(rng, seed // LAYOUT_SEEDS_PER_DOCUMENT, budget, regions, degradation)
    return Example(image, text, LAYOUT)


def draw_examples(
    start: int, count: int, stage: Stage, regions: RegionSplit | None = None, budget: PixelBudget | None = None
) -> list[Example]:
    """Samples start .. start+count-1 of the training stream, each at a level drawn from the stage's weights
    (`regions`: how the band and real levels cut a page, as the exported model's preset does; `budget`: the
    pixels a real page is rendered to)."""
    seeds = sample_seeds(start, count)
    levels, weights = zip(*stage.levels.items())
    examples = []
    for seed in seeds:
        rng = random.Random(seed)
        level = rng.choices(levels, weights=weights)[0]
        if level in (REAL, LAYOUT):
            examples.append(real_example(rng, regions, budget) if level == REAL else layout_example(seed, rng, regions, budget))
            continue
        # Drawn only when used, so a stage without random text sees the samples it always saw.
        random_text = stage.random_text > 0 and rng.random() < stage.random_text
        sample = make_sample(rng, level, random_text=random_text, placement=stage.placement, bold=stage.bold,
                             regions=regions, fonts=stage.fonts, lexicon=stage.lexicon)
        examples.append(Example(sample.image, sample.markdown, level))
    return examples


def held_out_examples(
    level: str, count: int, random_text: bool = False, regions: RegionSplit | None = None, budget: PixelBudget | None = None
) -> list[Example]:
    """A fixed evaluation set for one level, disjoint from the training stream and the benchmark (`real`: parts of
    the corpus's held-out documents)."""
    seeds = sample_seeds(HELD_OUT_START + TRAIN_LEVELS.index(level) * 2**20, count)
    if level == REAL:
        return [real_example(random.Random(seed), regions, budget, held_out=True) for seed in seeds]
    if level == LAYOUT:
        return [layout_example(seed, random.Random(seed), regions, budget) for seed in seeds]
    samples = [make_sample(seed, level, random_text=random_text, regions=regions) for seed in seeds]
    return [Example(sample.image, sample.markdown, level) for sample in samples]


@dataclass(frozen=True)
class MicroBatch:
    """Model inputs of some of a step's samples (see `Encoder.batch`) with their text and level, for the CTC loss."""

    inputs: dict[str, torch.Tensor]
    texts: tuple[str, ...]
    levels: tuple[str, ...]


@dataclass(frozen=True)
class TrainingBatch:
    """The samples of one optimizer step, in micro-batches of similar lengths (see `token_budget_groups`)."""

    micro_batches: tuple[MicroBatch, ...]


def token_budget_groups(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Indices of sequences grouped shortest first so that each group, padded to its longest, holds at most
    `max_tokens` tokens (a longer sequence goes alone); 0 keeps one group in the original order.

    A batch is padded to its longest sequence, and a line placed on a larger sheet
    brings ten times the visual tokens of a tight crop: at batch 16 the padding
    cost ~25% of a step on this CPU.  Smaller groups of like lengths waste less,
    and accumulate the same gradient.
    """
    if max_tokens <= 0:
        return [list(range(len(lengths)))]
    groups: list[list[int]] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        if groups and lengths[index] * (len(groups[-1]) + 1) <= max_tokens:
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


@dataclass(frozen=True)
class _Encoded:
    """One example as model rows: input ids, token types and labels [L], and its image's patches and grid."""

    ids: torch.Tensor
    token_types: torch.Tensor
    labels: torch.Tensor
    pixel_values: torch.Tensor
    grid: torch.Tensor


class Encoder:
    """Turns examples into model inputs: the chat prompt with the image, then the answer and <|im_end|>."""

    def __init__(self, processor, instruction: str):
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.prompt = processor.apply_chat_template(
            page_messages(instruction), add_generation_prompt=True, tokenize=False, enable_thinking=False
        )
        self.end_id = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.pad_id = self.tokenizer.convert_tokens_to_ids("<|endoftext|>")

    def prompt_inputs(self, image: Image.Image) -> dict[str, torch.Tensor]:
        return self.processor(text=[self.prompt], images=[image], return_tensors="pt")

    def encode(self, example: Example) -> _Encoded:
        prompt = self.prompt_inputs(example.image)
        prompt_ids = prompt["input_ids"][0]  # [P]
        answer_ids = torch.tensor(self.tokenizer(example.text, add_special_tokens=False).input_ids + [self.end_id])
        return _Encoded(
            ids=torch.cat([prompt_ids, answer_ids]),
            token_types=torch.cat([prompt["mm_token_type_ids"][0], torch.zeros_like(answer_ids)]),
            labels=torch.cat([torch.full_like(prompt_ids, IGNORE_INDEX), answer_ids]),
            pixel_values=prompt["pixel_values"],
            grid=prompt["image_grid_thw"],
        )

    def collate(self, encoded: list[_Encoded]) -> dict[str, torch.Tensor]:
        """input_ids/labels/attention_mask/mm_token_type_ids [B, T] (right-padded), pixel_values, image_grid_thw."""
        length = max(len(row.ids) for row in encoded)

        def pad(sequences: list[torch.Tensor], value: int) -> torch.Tensor:
            return torch.stack([torch.nn.functional.pad(seq, (0, length - len(seq)), value=value) for seq in sequences])

        return {
            "input_ids": pad([row.ids for row in encoded], self.pad_id),
            "attention_mask": pad([torch.ones_like(row.ids) for row in encoded], 0),
            "mm_token_type_ids": pad([row.token_types for row in encoded], 0),
            "labels": pad([row.labels for row in encoded], IGNORE_INDEX),
            "pixel_values": torch.cat([row.pixel_values for row in encoded]),  # [sum of patches, 3*2*16*16]
            "image_grid_thw": torch.cat([row.grid for row in encoded]),  # [B, 3]
        }

    def batch(self, examples: list[Example]) -> dict[str, torch.Tensor]:
        return self.collate([self.encode(example) for example in examples])

    def micro_batches(self, examples: list[Example], max_tokens: int) -> TrainingBatch:
        encoded = [self.encode(example) for example in examples]
        return TrainingBatch(tuple(
            MicroBatch(
                self.collate([encoded[i] for i in group]),
                tuple(examples[i].text for i in group),
                tuple(examples[i].level for i in group),
            )
            for group in token_budget_groups([len(row.ids) for row in encoded], max_tokens)
        ))


def noisy_history(inputs: dict[str, torch.Tensor], share: float, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """`inputs` with `share` of the answer tokens in input_ids swapped for answer tokens drawn from the whole
    micro-batch; labels keep the true text, so each next token must be predicted past a corrupted history."""
    labels = inputs["labels"]  # [b, T]
    answer = labels != IGNORE_INDEX  # [b, T]
    swapped = answer & (torch.rand(labels.shape, generator=generator) < share)  # [b, T]
    pool = labels[answer]  # [answer tokens]
    replacements = pool[torch.randint(len(pool), (int(swapped.sum()),), generator=generator)]
    input_ids = inputs["input_ids"].clone()
    input_ids[swapped] = replacements
    return {**inputs, "input_ids": input_ids}


def encoded_batch(
    encoder: Encoder, position: int, stage: Stage, max_tokens: int, regions: RegionSplit | None = None,
    budget: PixelBudget | None = None,
) -> TrainingBatch:
    batch = encoder.micro_batches(draw_examples(position, stage.batch_size, stage, regions, budget), max_tokens)
    if stage.history_noise == 0:
        return batch
    # Seeded by the data position, as the samples are: a resumed run sees the same noise.
    generator = torch.Generator().manual_seed(position)
    return TrainingBatch(tuple(
        MicroBatch(noisy_history(micro.inputs, stage.history_noise, generator), micro.texts, micro.levels)
        for micro in batch.micro_batches
    ))


_worker_encoder: Encoder | None = None


def _start_worker(processor_dir: Path, instruction: str) -> None:
    global _worker_encoder
    torch.set_num_threads(1)
    _worker_encoder = Encoder(AutoProcessor.from_pretrained(processor_dir), instruction)


def _worker_batch(
    position: int, stage: Stage, max_tokens: int, regions: RegionSplit | None, budget: PixelBudget | None
) -> TrainingBatch:
    return encoded_batch(_worker_encoder, position, stage, max_tokens, regions, budget)


class BatchStream:
    """The batches of a plan of (data position, stage), in order, up to 2 x `workers` rendered ahead of the trainer.

    Rendering and encoding took 0.12 s of a 0.38 s step (16 words) on this
    CPU, and stay the same while a GPU makes the model's part far shorter;
    worker processes overlap them with the model's work.  Each batch is a
    pure function of its position, so the stream is the same with any number
    of workers (0: in this process, nothing ahead).
    """

    def __init__(
        self, encoder: Encoder, processor_dir: Path, instruction: str, workers: int, max_tokens: int,
        regions: RegionSplit | None = None, budget: PixelBudget | None = None,
    ):
        self.encoder = encoder
        self.max_tokens = max_tokens
        self.regions = regions
        self.budget = budget
        self.pool = (
            ProcessPoolExecutor(workers, initializer=_start_worker, initargs=(processor_dir, instruction))
            if workers > 0
            else None
        )
        self.ahead = 2 * workers

    def batches(self, plan: Iterator[tuple[int, Stage]]) -> Iterator[TrainingBatch]:
        if self.pool is None:
            for position, stage in plan:
                yield encoded_batch(self.encoder, position, stage, self.max_tokens, self.regions, self.budget)
            return
        pending: deque[Future] = deque()
        for position, stage in plan:
            pending.append(self.pool.submit(_worker_batch, position, stage, self.max_tokens, self.regions, self.budget))
            if len(pending) > self.ahead:
                yield pending.popleft().result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
