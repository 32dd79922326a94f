"""One score table from several `ocr-eval real` reports of disjoint pages (a run split by --categories or
--renderings to use more processes or machines): each page's scores are taken as they were, then averaged again.

    python benchmarks/merge_real_reports.py reports/real-*/report.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ocr_app.real_report import Reader, score_table
from ocr_app.realbench import RealPage, TextLayerScore, group_scores


def _not_loaded(budget):
    raise RuntimeError("a merged page has no image")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", type=Path, nargs="+")
    args = parser.parse_args()
    pages: list[RealPage] = []
    readings: dict[str, dict[str, dict]] = {}  # reader -> page id -> reading
    for path in args.reports:
        report = json.loads(path.read_text(encoding="utf-8"))
        for page in report["pages"]:
            pages.append(RealPage(id=page["id"], category=page["category"], reference=page["reference"],
                                  source=page["source"], load=_not_loaded, rendering=page["rendering"]))
            for name, reading in page["readings"].items():
                readings.setdefault(name, {})[page["id"]] = reading
    readers = []
    for name, by_page in readings.items():
        if len(by_page) != len(pages):
            raise SystemExit(f"reader '{name}' read {len(by_page)} of the {len(pages)} pages: the reports do not match")
        scores = {page_id: TextLayerScore(**{key: reading[key] for key in TextLayerScore.__dataclass_fields__})
                  for page_id, reading in by_page.items()}
        readers.append(Reader(name, {page_id: r["text"] for page_id, r in by_page.items()}, scores,
                              group_scores(pages, scores)))
    print("\n".join(score_table(readers)))


if __name__ == "__main__":
    main()
