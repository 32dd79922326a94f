"""Which character edits cost a model's readings their words, from an `ocr-eval real` report: per rendering, the
truth words missed, how many were misread rather than lost (a wrong word within a few edits), and the most
common edits (`scoring.missed_words`).

    python benchmarks/missed_words.py reports/ocr-tiny-tr-real/report.json
    python benchmarks/missed_words.py /tmp/real/report.json --reader "model, No MTP" --top 30
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

from ocr_app.scoring import MissedWords, missed_words, plain_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--reader", help="reading to look at (default: the report's first model reading)")
    parser.add_argument("--top", type=int, default=20, help="edits to list")
    args = parser.parse_args()
    pages = json.loads(args.report.read_text(encoding="utf-8"))["pages"]
    reader = args.reader or next(name for name in pages[0]["readings"] if name.startswith("model"))
    by_rendering: dict[str, list[MissedWords]] = defaultdict(list)
    for page in pages:
        by_rendering[page["rendering"]].append(missed_words(plain_text(page["readings"][reader]["text"]), plain_text(page["reference"])))
    print(f"{args.report}: {reader}")
    for rendering, found in by_rendering.items():
        missed, near = sum(page.missed for page in found), sum(page.near for page in found)
        edits = sum((page.edits for page in found), Counter())
        print(f"\n{rendering}: {missed} truth words missed, {near} of them misread (a wrong word within a few edits)")
        print("| edit | read | truth | count |\n|---|---|---|---:|")
        for (kind, read, truth), count in edits.most_common(args.top):
            print(f"| {kind} | {read} | {truth} | {count} |")


if __name__ == "__main__":
    main()
