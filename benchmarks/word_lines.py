"""How well does the model read clean lines of Turkish dictionary words, typeface by typeface?

    python benchmarks/word_lines.py [--model ocr-tiny-tr] [--lines 24] [--size 15]

Lines of at least 34 characters of words from the Turkish spelling dictionary with their suffixes (the list the
`lexicon` training option draws from, `ocr_app/synth/words/`), black on white, drawn in each typeface
installed (the bundled DejaVu faces, and the document families of `make train-setup`), and read as
`ocr-read` reads an image (cut into bands and enlarged; transformers, greedy).  No layout, no damage, no
digits or punctuation: what is left is reading letters.  Prints each face's CER and its mean character
width, so that a reader losing narrow type shows up beside one that misreads every face alike.
"""

from __future__ import annotations

import argparse
import random

from rapidfuzz.distance import Levenshtein

from ocr_app.config import load_model_preset
from ocr_app.engine_factory import make_engine, quiet_libraries
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.synth.lexicon import dictionary_words
from ocr_app.synth.render import FAMILIES, Style, installed_families, render_line

LINE_CHARACTERS = 34
MARGIN = 60


def word_lines(count: int, seed: int) -> list[str]:
    """`count` lines of dictionary words, each at least LINE_CHARACTERS long."""
    rng = random.Random(seed)
    vocabulary = dictionary_words()
    lines = []
    for _ in range(count):
        words: list[str] = []
        while sum(len(word) + 1 for word in words) < LINE_CHARACTERS:
            words.append(rng.choice(vocabulary))
        lines.append(" ".join(words))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ocr-tiny-tr")
    parser.add_argument("--lines", type=int, default=24, help="lines read in each face")
    parser.add_argument("--size", type=int, default=15, help="type size in px (small type is enlarged as ocr-read enlarges it)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    quiet_libraries()
    engine = make_engine("hf", load_model_preset(args.model))  # cuts and enlarges as ocr-read does
    settings = GenerationSettings(max_tokens=300)
    lines = word_lines(args.lines, args.seed)
    characters = sum(len(line) for line in lines)
    print(f"model {args.model}, {args.lines} lines ({characters} characters) of dictionary words at {args.size} px, greedy, hf")
    for family in (*FAMILIES, *installed_families()):
        style = Style(family=family, size=args.size, ink=(20, 20, 20), paper=(255, 255, 255), margin=MARGIN, grid="none")
        errors = 0
        for line in lines:
            image = render_line(line, style, margins=(MARGIN,) * 4)
            errors += Levenshtein.distance(engine.read(image, settings).text.strip(), line)
        width = sum(style.font().getlength(line) for line in lines) / characters
        print(f"{family:18s} character width {width:4.1f} px   CER {errors / characters:.3f}", flush=True)


if __name__ == "__main__":
    main()
