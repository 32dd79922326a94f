"""Write the shipped sample benchmark: `python -m ocr_app.synth.make_samples [samples/tob-mini]`.

Pages come from the reserved benchmark seeds, in the TOB folder layout
(`<category>/<id>.jpg` + `<id>.md`), with `manifest.json` recording each page's
seed, kind and degradation so the set can be regenerated and checked.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ocr_app.synth import BENCHMARK_SEEDS, KINDS, make_sample

PAGES_PER_KIND = 6
DEGRADATION_CYCLE = ("clean", "light", "scan", "heavy", "scan", "light")
JPEG_QUALITY = 70


def write_samples(out_dir: Path, pages_per_kind: int = PAGES_PER_KIND) -> list[dict]:
    manifest = []
    for kind_index, kind in enumerate(KINDS):
        (out_dir / kind).mkdir(parents=True, exist_ok=True)
        for number in range(pages_per_kind):
            seed = BENCHMARK_SEEDS.start + kind_index * 1000 + number
            degradation = DEGRADATION_CYCLE[number % len(DEGRADATION_CYCLE)]
            sample = make_sample(seed, level="page", kind=kind, degradation=degradation, benchmark=True)
            page_id = f"{kind}-{number + 1:02d}"
            sample.image.convert("L").save(out_dir / kind / f"{page_id}.jpg", quality=JPEG_QUALITY, optimize=True)
            (out_dir / kind / f"{page_id}.md").write_text(sample.markdown + "\n", encoding="utf-8")
            manifest.append({"id": f"{kind}/{page_id}", "seed": seed, "kind": kind, "degradation": degradation})
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def main() -> None:
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("samples/tob-mini")
    manifest = write_samples(out_dir)
    print(f"wrote {len(manifest)} pages to {out_dir}")


if __name__ == "__main__":
    main()
