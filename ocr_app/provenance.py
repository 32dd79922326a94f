"""Where an artifact came from: the commit the code ran from, recorded beside trained weights."""

from __future__ import annotations

import subprocess

from ocr_app.config import PROJECT_ROOT


def code_version() -> str:
    """The commit the code runs from, marked `+dirty` when the worktree has uncommitted changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")
