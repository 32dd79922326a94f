"""Manifests of public documents (`sources.toml`): each PDF's source repository, commit, hash and licence.

The real-document benchmark (`samples/real-tr`) and the training corpus (`ocr_app/train_ocr/corpus`) list
their PDFs as `[[document]]` tables, each validated by a pydantic model of its own.
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import TypeVar

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
