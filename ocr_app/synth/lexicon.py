"""Real Turkish words with their suffixes, from the spelling dictionary of LibreOffice (Debian's `hunspell-tr`).

The generator's own lists hold a few hundred words; the model learnt their shapes and wrote them over what it
saw ("depomun" for "depomuzun", "sevkiyat" for "sevkiyatlar").  `tr_TR.dic` lists 371 169 stems, each with the
numbers of the suffixes it takes; each suffix of `tr_TR.aff` is a plain ending (`SFX 2 0 dan .`: strip nothing,
add "dan", any stem), so the stems with their suffixes are 1 369 540 words.  A sample of `WORDS_SHIPPED` of them,
drawn with a fixed seed, ships as `words/tr-hunspell.txt.gz` (MPL-2.0, as the dictionary; see
`words/README.md`), so training needs no package; `python -m ocr_app.synth.lexicon` writes it again.
"""

from __future__ import annotations

import argparse
import gzip
import random
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

WORDS_FILE = Path(__file__).resolve().parent / "words" / "tr-hunspell.txt.gz"
HUNSPELL = Path("/usr/share/hunspell")
WORDS_SHIPPED = 120_000  # ~0.5 MB gzipped: enough that a run of a few thousand steps rarely sees a word twice
SAMPLE_SEED = 21


def suffixes(aff: Path) -> dict[str, list[str]]:
    """Flag -> the endings it adds, from a hunspell affix file whose suffixes strip nothing and take any stem."""
    endings: dict[str, list[str]] = {}
    for line in aff.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0] == "SFX":
            flag, strip, add, condition = parts[1], parts[2], parts[3].split("/")[0], parts[4]
            if strip != "0" or condition != ".":
                raise ValueError(f"{aff}: suffix {flag} strips or has a condition; this expansion handles neither")
            endings.setdefault(flag, []).append(add)
    return endings


def expanded(dic: Path, aff: Path) -> Iterator[str]:
    """Every stem of `dic` and every stem with each of its suffixes."""
    endings = suffixes(aff)
    for line in dic.read_text(encoding="utf-8").splitlines()[1:]:  # the first line is the count
        stem, _, flags = line.strip().partition("/")
        if not stem:
            continue
        yield stem
        for flag in flags.split(",") if flags else ():
            for ending in endings.get(flag, ()):
                yield stem + ending


@lru_cache(maxsize=1)
def dictionary_words() -> tuple[str, ...]:
    """The shipped sample of dictionary words (empty where the file is missing)."""
    if not WORDS_FILE.is_file():
        return ()
    with gzip.open(WORDS_FILE, "rt", encoding="utf-8") as lines:
        return tuple(line.rstrip("\n") for line in lines if line.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description="Write the shipped sample of hunspell-tr's expanded words.")
    parser.add_argument("--dictionary", type=Path, default=HUNSPELL, help="folder holding tr_TR.dic and tr_TR.aff")
    parser.add_argument("--count", type=int, default=WORDS_SHIPPED)
    parser.add_argument("--output", type=Path, default=WORDS_FILE)
    args = parser.parse_args()
    dic, aff = args.dictionary / "tr_TR.dic", args.dictionary / "tr_TR.aff"
    if not dic.is_file() or not aff.is_file():
        raise SystemExit(f"{args.dictionary}: no tr_TR.dic / tr_TR.aff (apt-get install hunspell-tr)")
    words = sorted(set(expanded(dic, aff)))
    sample = sorted(random.Random(SAMPLE_SEED).sample(words, min(args.count, len(words))))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same words give the same bytes.
    with open(args.output, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
        packed.write(("\n".join(sample) + "\n").encode("utf-8"))
    print(f"{args.output}: {len(sample)} of {len(words)} words")


if __name__ == "__main__":
    main()
