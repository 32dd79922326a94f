"""Rebuild samples/real-tr's PDFs from their sources: each listed source file, read at its recorded commit from a
local git snapshot of its repository, checked against its recorded SHA-256, cut to the recorded pages.

    python benchmarks/cut_real_tr.py --snapshots /work/.mirror [--root samples/real-tr]

A snapshot of `owner/name` is looked for as SNAPSHOTS/owner+name/repo (a bare git directory or a checkout).
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

import pymupdf

from ocr_app.realbench import DEFAULT_ROOT, RealDocument, read_manifest


def source_bytes(snapshots: Path, document: RealDocument) -> bytes:
    repo = snapshots / document.repo.replace("/", "+") / "repo"
    git_dir = repo / ".git" if (repo / ".git").is_dir() else repo
    return subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{document.commit}:{document.path}"],
                          capture_output=True, check=True).stdout


def cut(data: bytes, pages: list[int], target: Path) -> None:
    with pymupdf.open(stream=data, filetype="pdf") as source, pymupdf.open() as kept:
        for number in pages:
            kept.insert_pdf(source, from_page=number - 1, to_page=number - 1)
        target.parent.mkdir(parents=True, exist_ok=True)
        kept.save(target, garbage=4, deflate=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=Path, required=True)
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args()
    for document in read_manifest(args.root):
        data = source_bytes(args.snapshots, document)
        digest = hashlib.sha256(data).hexdigest()
        if digest != document.source_sha256:
            sys.exit(f"{document.repo}:{document.path}: SHA-256 {digest}, manifest says {document.source_sha256}")
        cut(data, document.pages, args.root / document.file)
        print(f"{document.file}: pages {document.pages} of {document.repo}:{document.path}")


if __name__ == "__main__":
    main()
