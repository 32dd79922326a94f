"""How close a page's OCR text is to its ground truth.

TurkishOCR-Bench's own scoring script is not public, so this is our score,
stated exactly.  Both texts are first normalised (`normalize`):

1. Unicode NFC;
2. Markdown emphasis markers are dropped: `**`, `__`, and `*` or `_` runs that
   open or close a word (`**KDV:**`, `_not_`); a `_` or `*` inside a word or
   standing alone (`dosya_adi`, `2 * 3`) stays;
3. table delimiter rows lose their alignment colons (`| ---: |` -> `| --- |`)
   and spaces around `|` are dropped, so table spacing is not text;
4. every run of whitespace (newlines included) becomes one space, ends trimmed;
5. only when case is ignored: Turkish case folding (`I` -> `ı`, `İ` -> `i`,
   then lower case), so `IŞIK` matches `ışık` and `İZMİR` matches `izmir`.

Then, with Levenshtein distances from rapidfuzz (unit costs):

* similarity = 100 * (1 - distance / max(len(prediction), len(reference))),
  i.e. 100 * (1 - NED); two empty texts score 100;
* CER = character distance / len(reference);
* WER = distance between the lists of space-separated words / number of
  reference words.
CER and WER can exceed 1 when the prediction is much longer than the reference;
both are 0 for an empty reference matched by an empty prediction, and 1 when
only the reference is empty.

Averages: per category the mean of its pages; overall both the mean of the
category means (each category weighs the same) and the mean of all pages.
A scorer is any function `(prediction, reference) -> PageScore`, so another
definition can be plugged in without touching the runs or reports.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

_EMPHASIS = re.compile(r"\*\*|__|(?<![^\s\W])[*_]+(?=\S)|(?<=\S)[*_]+(?![^\s\W])")
_DELIMITER_CELL = re.compile(r"(?<=\|)\s*:?-{3,}:?\s*(?=\|)")
_PIPE_SPACE = re.compile(r"[ \t]*\|[ \t]*")
_WHITESPACE = re.compile(r"\s+")
_TURKISH_UPPER = str.maketrans({"I": "ı", "İ": "i"})


@dataclass(frozen=True)
class PageScore:
    similarity: float  # 0-100, 100 = identical after normalisation
    cer: float
    wer: float


Scorer = Callable[[str, str], PageScore]


def turkish_casefold(text: str) -> str:
    return text.translate(_TURKISH_UPPER).lower()


def normalize(text: str, ignore_case: bool = False) -> str:
    text = unicodedata.normalize("NFC", text)
    text = _EMPHASIS.sub("", text)
    text = _DELIMITER_CELL.sub("---", text)
    text = _PIPE_SPACE.sub("|", text)
    text = _WHITESPACE.sub(" ", text).strip()
    return turkish_casefold(text) if ignore_case else text


_DELIMITER_ROW = re.compile(r"^[|\s:-]*-{3,}[|\s:-]*$", re.M)
_STRUCTURE = re.compile(r"^#+ |\|", re.M)


def plain_text(markdown: str) -> str:
    """The words of Markdown without its structure: headings' hashes, table pipes and delimiter rows, emphasis.

    For references that hold text alone, such as a PDF's text layer, against which structure cannot be scored.
    """
    return normalize(_STRUCTURE.sub(" ", _DELIMITER_ROW.sub("", markdown)))


def plain_lines(markdown: str) -> list[str]:
    """`plain_text` line by line, empty lines dropped: a reading's lines for matching against truth lines."""
    return [line for line in (plain_text(raw) for raw in markdown.splitlines()) if line]


def _error_rate(distance: int, reference_length: int, prediction_length: int) -> float:
    if reference_length:
        return distance / reference_length
    return 0.0 if prediction_length == 0 else 1.0


def score_page(prediction: str, reference: str, ignore_case: bool = False) -> PageScore:
    """The default scorer: 1 - NED as 0-100, CER and WER, on normalised text."""
    predicted, expected = normalize(prediction, ignore_case), normalize(reference, ignore_case)
    similarity = 100.0 * (1.0 - Levenshtein.normalized_distance(predicted, expected))
    cer = _error_rate(Levenshtein.distance(predicted, expected), len(expected), len(predicted))
    predicted_words, expected_words = predicted.split(), expected.split()
    wer = _error_rate(
        Levenshtein.distance(predicted_words, expected_words), len(expected_words), len(predicted_words)
    )
    return PageScore(similarity=similarity, cer=cer, wer=wer)


def make_scorer(ignore_case: bool = False) -> Scorer:
    return partial(score_page, ignore_case=ignore_case)


@dataclass(frozen=True)
class ScoreSummary:
    """Averages of page scores: per category, over categories, over pages."""

    per_category: dict[str, PageScore]
    pages_per_category: dict[str, int]
    category_mean: PageScore
    page_mean: PageScore
    pages: int

    def to_dict(self) -> dict:
        def rounded(score: PageScore) -> dict:
            return {"similarity": round(score.similarity, 3), "cer": round(score.cer, 5), "wer": round(score.wer, 5)}

        return {
            "score": round(self.category_mean.similarity, 3),
            "category_mean": rounded(self.category_mean),
            "page_mean": rounded(self.page_mean),
            "pages": self.pages,
            "per_category": {
                name: {**rounded(score), "pages": self.pages_per_category[name]}
                for name, score in self.per_category.items()
            },
        }


def _mean(scores: list[PageScore]) -> PageScore:
    count = len(scores)
    if not count:
        return PageScore(0.0, 0.0, 0.0)
    return PageScore(
        similarity=sum(s.similarity for s in scores) / count,
        cer=sum(s.cer for s in scores) / count,
        wer=sum(s.wer for s in scores) / count,
    )


def summarize(scored: Iterable[tuple[str, PageScore]]) -> ScoreSummary:
    """Averages of (category, page score) pairs."""
    by_category: dict[str, list[PageScore]] = defaultdict(list)
    for category, score in scored:
        by_category[category].append(score)
    per_category = {name: _mean(scores) for name, scores in sorted(by_category.items())}
    all_scores = [score for scores in by_category.values() for score in scores]
    return ScoreSummary(
        per_category=per_category,
        pages_per_category={name: len(scores) for name, scores in sorted(by_category.items())},
        category_mean=_mean(list(per_category.values())),
        page_mean=_mean(all_scores),
        pages=len(all_scores),
    )


# Order-robust measures, for truths whose order is not the reading's order (a PDF's text layer).

def _is_punctuation(character: str) -> bool:
    return unicodedata.category(character).startswith("P")


def _strip_punctuation(token: str) -> str:
    start, end = 0, len(token)
    while start < end and _is_punctuation(token[start]):
        start += 1
    while end > start and _is_punctuation(token[end - 1]):
        end -= 1
    return token[start:end]


def words(text: str) -> list[str]:
    """NFKC words: split at whitespace, punctuation (Unicode P*) stripped from both ends, punctuation-only tokens
    dropped; so `(1)` is `1`, `5-` is `5`, `19.02.2024` stays whole."""
    stripped = (_strip_punctuation(token) for token in unicodedata.normalize("NFKC", text).split())
    return [token for token in stripped if token]


@dataclass(frozen=True)
class WordMatch:
    precision: float
    recall: float
    f1: float


def word_f1(prediction: str, reference: str) -> WordMatch:
    """Precision, recall and F1 of the multiset of `words(prediction)` against that of `words(reference)`;
    order does not count, each word counts as often as it occurs, case does.  Two empty texts match fully."""
    predicted, expected = Counter(words(prediction)), Counter(words(reference))
    common = sum((predicted & expected).values())
    total_predicted, total_expected = sum(predicted.values()), sum(expected.values())
    if not total_predicted and not total_expected:
        return WordMatch(1.0, 1.0, 1.0)
    precision = common / total_predicted if total_predicted else 0.0
    recall = common / total_expected if total_expected else 0.0
    f1 = 2 * common / (total_predicted + total_expected)
    return WordMatch(precision, recall, f1)


def _nfkc_line(line: str) -> str:
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", line)).strip()


def _line_distance(truth: str, reading_lines: list[str]) -> int:
    """Edit distance from `truth` to the stretch of one reading line that matches it best (the whole line when
    the line is shorter than `truth`); `len(truth)` when there is no reading line."""
    best = len(truth)
    for line in reading_lines:
        if len(line) <= len(truth):
            best = min(best, Levenshtein.distance(truth, line))
            continue
        span = fuzz.partial_ratio_alignment(truth, line)
        best = min(best, Levenshtein.distance(truth, line[span.dest_start : span.dest_end]))
    return best


def matched_line_cer(prediction_lines: list[str], reference_lines: list[str]) -> float:
    """CER of the truth's lines, each against its best-matching reading line (`_line_distance`), in any order:
    the sum of their distances over the truth's characters (NFKC, whitespace runs as one space, case counts).
    Recall-like: text the reading adds is not charged (word F1's precision sees it).  0 for an empty truth."""
    truths = [line for line in map(_nfkc_line, reference_lines) if line]
    readings = [line for line in map(_nfkc_line, prediction_lines) if line]
    characters = sum(len(truth) for truth in truths)
    if not characters:
        return 0.0
    return sum(_line_distance(truth, readings) for truth in truths) / characters


# Which character edits cost a reading its words: each truth word the reading missed is paired with the nearest
# word the reading wrote instead, when one is close enough to be a misreading of it rather than another word.
# An edit from the reading to the truth is named for what the reading did.
_EDIT_KINDS = {"insert": "dropped", "delete": "added", "replace": "replaced"}


@dataclass(frozen=True)
class MissedWords:
    missed: int  # truth words the reading lacks (multiset difference, `words`)
    near: int  # of them, those paired with a wrong word of the reading within `max(2, len // 3)` edits
    # (kind, read, truth) -> count over the pairs: ("dropped", "", "l"), ("replaced", "ı", "u"), ("added", "1", "")
    edits: Counter


def missed_words(prediction: str, reference: str) -> MissedWords:
    """The truth's words missing from `prediction` (both `words` of their texts) and the character edits that
    would turn each one's nearest wrong word into it, pairs taken greedily in the truth's order (each wrong word
    used once)."""
    predicted, expected = Counter(words(prediction)), Counter(words(reference))
    missing, wrong = list((expected - predicted).elements()), list((predicted - expected).elements())
    edits: Counter = Counter()
    near = 0
    for truth in missing:
        if not wrong:
            break
        # the first nearest wrong word
        distance, read = min(((Levenshtein.distance(truth, candidate), candidate) for candidate in wrong), key=lambda pair: pair[0])
        if distance > max(2, len(truth) // 3):
            continue
        wrong.remove(read)
        near += 1
        for op in Levenshtein.editops(read, truth):
            read_char = "" if op.tag == "insert" else read[op.src_pos]
            truth_char = "" if op.tag == "delete" else truth[op.dest_pos]
            edits[(_EDIT_KINDS[op.tag], read_char, truth_char)] += 1
    return MissedWords(len(missing), near, edits)
