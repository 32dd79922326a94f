"""Manifests of public documents (`sources.toml`): each PDF's source repository, commit, hash and licence.

The real-document benchmark (`samples/real-tr`) and the training corpus (`ocr_app/train_ocr/corpus`) list
their PDFs as `[[document]]` tables, each validated by a pydantic model of its own.  Both rebuild their PDFs from
local git snapshots of the source repositories (`snapshot_bytes`); a PDF made from an XML source (an e-Fatura's
UBL-TR) is rendered through the `Stylesheet` its entry records (`source_pdf`).
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ocr_app.errors import InputError

MANIFEST = "sources.toml"
Entry = TypeVar("Entry", bound=BaseModel)


def read_manifest(root: Path, entry: type[Entry], what: str) -> list[Entry]:
    """The documents `root/sources.toml` lists as `entry`s, whether or not their PDFs are there; `what` names
    the set in the message when the manifest is missing."""
    manifest = root / MANIFEST
    if not manifest.is_file():
        raise InputError(f"{root}: no {MANIFEST} ({what} lists its PDFs and their sources there)")
    listing = create_model(
        "Manifest", __config__=ConfigDict(extra="forbid"), document=(list[entry], Field(min_length=1))
    )
    try:
        return listing.model_validate(tomllib.loads(manifest.read_text(encoding="utf-8"))).document
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{manifest}: not valid TOML ({exc})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(f"{manifest}: {'.'.join(str(part) for part in first['loc'])}: {first['msg']}") from None


def load_manifest(root: Path, entry: type[Entry], what: str) -> list[Entry]:
    """`read_manifest`, each listed PDF (its `file`) required to be there."""
    documents = read_manifest(root, entry, what)
    missing = [document.file for document in documents if not (root / document.file).is_file()]
    if missing:
        raise InputError(f"{root / MANIFEST}: listed but missing: {', '.join(missing)}")
    return documents


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Stylesheet(BaseModel):
    """The XSLT that turned a document's XML source (an e-Fatura's UBL-TR) into the HTML printed to PDF, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    path: str
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    licence: str = Field(min_length=3)
    # the shell command that renders it, with {stylesheet}, {source}, {html} and {pdf} for the files
    command: str = Field(pattern=r"\{stylesheet\}.*\{source\}.*\{html\}.*\{pdf\}")


def snapshot_bytes(snapshots: Path, repo: str, commit: str, path: str, sha256: str) -> bytes:
    """`path` at `commit` in the snapshot of `repo` (SNAPSHOTS/owner+name/repo, a bare git directory or a
    checkout), checked against `sha256`."""
    snapshot = snapshots / repo.replace("/", "+") / "repo"
    git_dir = snapshot / ".git" if (snapshot / ".git").is_dir() else snapshot
    shown = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], capture_output=True)
    if shown.returncode != 0:
        raise InputError(f"{repo}:{path} at {commit}: {shown.stderr.decode(errors='replace').strip()}")
    digest = hashlib.sha256(shown.stdout).hexdigest()
    if digest != sha256:
        raise InputError(f"{repo}:{path}: SHA-256 {digest}, the manifest says {sha256}")
    return shown.stdout


def source_pdf(snapshots: Path, repo: str, commit: str, path: str, sha256: str, stylesheet: Stylesheet | None) -> bytes:
    """A document's PDF before cutting: the source file itself, or the source XML rendered through `stylesheet`
    by its command (xsltproc, then headless Chromium's print to PDF).  A rendered PDF is not byte-identical from
    one run to the next (Chromium stamps the time, fonts are the machine's); its text layer is what must not change."""
    data = snapshot_bytes(snapshots, repo, commit, path, sha256)
    style = stylesheet
    if style is None:
        return data
    with tempfile.TemporaryDirectory() as work:
        files = {name: Path(work) / name for name in ("stylesheet.xslt", "source.xml", "page.html", "page.pdf")}
        files["stylesheet.xslt"].write_bytes(snapshot_bytes(snapshots, style.repo, style.commit, style.path, style.sha256))
        files["source.xml"].write_bytes(data)
        command = style.command.format(**{key: shlex.quote(str(files[name])) for key, name in (
            ("stylesheet", "stylesheet.xslt"), ("source", "source.xml"), ("html", "page.html"), ("pdf", "page.pdf"))})
        rendered = subprocess.run(command, shell=True, capture_output=True)
        if rendered.returncode != 0 or not files["page.pdf"].is_file():
            raise InputError(f"{repo}:{path} through {style.path}: rendering failed ({rendered.stderr.decode(errors='replace')[-300:].strip()})")
        return files["page.pdf"].read_bytes()


class SourcedDocument(Protocol):
    """What `rebuild_pdfs` reads of a manifest entry (the benchmark's and the corpus's both have it)."""

    file: str
    repo: str
    path: str
    commit: str
    source_sha256: str
    pages: list[int]
    stylesheet: Stylesheet | None


def rebuild_pdfs(documents: Iterable[SourcedDocument], snapshots: Path, root: Path,
                 cut: Callable[[bytes, list[int]], bytes], only: Iterable[str] | None = None) -> Iterator[SourcedDocument]:
    """Write each document's PDF (`only` those files, if given) under `root`: its source from `snapshots`,
    rendered if it has a stylesheet, cut to its pages by `cut`; yields each document once written."""
    wanted = set(only or ())
    for document in documents:
        if wanted and document.file not in wanted:
            continue
        data = source_pdf(snapshots, document.repo, document.commit, document.path, document.source_sha256,
                          document.stylesheet)
        target = root / document.file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(cut(data, document.pages))
        yield document
