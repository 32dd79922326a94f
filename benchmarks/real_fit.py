"""Does the model read the corpus pages it trained on better than the held-out ones?

    python benchmarks/real_fit.py [--model ocr-tiny-tr] [--parts 80]

Greedy CER (transformers engine, one part at a time, as `ocr-read` reads a band) on parts of the training
corpus's trained documents and of its held-out documents (`ocr_app/train_ocr/corpus/`), each drawn and
damaged as the `real` training level draws them.  Far better on the trained documents: the model learns
those pages by heart, and more real pages are the lever.  About the same: it has not even fitted the pages
it sees, and training compute (or the model's size) is.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

from PIL import Image
from rapidfuzz.distance import Levenshtein

from ocr_app.config import ModelPreset, load_model_preset
from ocr_app.engine_factory import make_engine, quiet_libraries
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.train_ocr.data import real_example

# Seeds of the parts drawn: apart from the periodic evaluation's (data.HELD_OUT_START and up).
FIRST_SEED = 10_000


def corpus_cer(read: Callable[[Image.Image], str], model: ModelPreset, parts: int, held_out: bool) -> float:
    errors = characters = 0
    for seed in range(FIRST_SEED, FIRST_SEED + parts):
        example = real_example(random.Random(seed), model.regions, model.pixels, held_out=held_out)
        errors += Levenshtein.distance(read(example.image), example.text)
        characters += len(example.text)
    return errors / characters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ocr-tiny-tr")
    parser.add_argument("--parts", type=int, default=80, help="parts drawn from each side")
    args = parser.parse_args()
    quiet_libraries()
    model = load_model_preset(args.model)
    # The bare engine: a part is already cut, and the regions wrapper would cut it again.
    engine = make_engine("hf", model).engine
    settings = GenerationSettings(max_tokens=300)

    def read(image: Image.Image) -> str:
        return engine.read(image, settings).text

    print(f"model {args.model}, {args.parts} parts a side, greedy, hf")
    for held_out in (False, True):
        print(f"{'held-out' if held_out else 'trained':9s} documents: CER {corpus_cer(read, model, args.parts, held_out):.3f}", flush=True)


if __name__ == "__main__":
    main()
