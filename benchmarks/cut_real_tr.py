"""Rebuild samples/real-tr's PDFs from their sources: each listed source file, read at its recorded commit from a
local git snapshot of its repository, checked against its recorded SHA-256, cut to the recorded pages.  A document
with a `stylesheet` (an e-Fatura's UBL-TR XML) is first rendered to PDF by the command the manifest records
(xsltproc, then headless Chromium's print to PDF), with the stylesheet read and checked the same way.

    python benchmarks/cut_real_tr.py --snapshots /work/.mirror [--root samples/real-tr] [--only invoice/x.pdf ...]

A snapshot of `owner/name` is looked for as SNAPSHOTS/owner+name/repo (a bare git directory or a checkout).
A rendered PDF is not byte-identical from one run to the next (Chromium stamps the time, fonts are the machine's):
its text layer is what must not change.
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pymupdf

from ocr_app.realbench import DEFAULT_ROOT, RealDocument, read_manifest


def file_bytes(snapshots: Path, repo: str, commit: str, path: str, sha256: str) -> bytes:
    """`path` at `commit` in the snapshot of `repo`, checked against `sha256`."""
    snapshot = snapshots / repo.replace("/", "+") / "repo"
    git_dir = snapshot / ".git" if (snapshot / ".git").is_dir() else snapshot
    data = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"],
                          capture_output=True, check=True).stdout
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        sys.exit(f"{repo}:{path}: SHA-256 {digest}, manifest says {sha256}")
    return data


def source_pdf(snapshots: Path, document: RealDocument) -> bytes:
    """The document's PDF before cutting: the source file itself, or the source XML rendered through its stylesheet."""
    data = file_bytes(snapshots, document.repo, document.commit, document.path, document.source_sha256)
    style = document.stylesheet
    if style is None:
        return data
    with tempfile.TemporaryDirectory() as work:
        files = {name: Path(work) / name for name in ("stylesheet.xslt", "source.xml", "page.html", "page.pdf")}
        files["stylesheet.xslt"].write_bytes(file_bytes(snapshots, style.repo, style.commit, style.path, style.sha256))
        files["source.xml"].write_bytes(data)
        command = style.command.format(**{key: shlex.quote(str(files[name])) for key, name in (
            ("stylesheet", "stylesheet.xslt"), ("source", "source.xml"), ("html", "page.html"), ("pdf", "page.pdf"))})
        subprocess.run(command, shell=True, check=True, capture_output=True)
        return files["page.pdf"].read_bytes()


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
    parser.add_argument("--only", nargs="+", metavar="FILE", help="rebuild only these files (as the manifest names them)")
    args = parser.parse_args()
    for document in read_manifest(args.root):
        if args.only and document.file not in args.only:
            continue
        cut(source_pdf(args.snapshots, document), document.pages, args.root / document.file)
        print(f"{document.file}: pages {document.pages} of {document.repo}:{document.path}")


if __name__ == "__main__":
    main()
