"""Helpers to run `ocr-ui` for tests and screenshots: a real server process and Debian's headless Chromium.

Playwright drives the system Chromium (`/usr/bin/chromium`, from Debian's
`chromium` package); it never downloads a browser of its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
READ_TIMEOUT_MS = 120_000


def find_chromium() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serve(model: str | Path, workdir: Path, *extra_args: str, timeout_s: float = 180) -> Iterator[str]:
    """Run `ocr-ui` on loopback with the hf engine and `model` (a preset name or folder); yields its URL,
    stops it (SIGTERM) on exit.

    Its temporary files go under `workdir` (TMPDIR), its output to `workdir/ocr-ui.log`.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    command = [sys.executable, "-m", "ui.cli", "--model", str(model), "--engine", "hf", "--port", str(port), *extra_args]
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "TMPDIR": str(workdir)}
    log_path = workdir / "ocr-ui.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_until_up(url, server, log_path, timeout_s)
        yield url
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _wait_until_up(url: str, server: subprocess.Popen, log_path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"ocr-ui exited with {server.returncode}:\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"ocr-ui did not answer within {timeout_s:.0f} s:\n{log_path.read_text()}")


def launch_chromium(playwright, executable: str):
    return playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)


def read_in_page(page, files: list[Path], drafts: int | None = 0) -> str:
    """Upload `files`, set the drafts (None: the mode's), press Read and wait until the request is over;
    returns the progress text.

    Over means the Read button went disabled and came back, with the progress line at its end.
    """
    page.locator("#uploads input[type=file]").set_input_files([str(path) for path in files])
    for path in files:  # the upload's preview names every file, good or bad
        page.locator("#uploaded, #errors").filter(has_text=path.name).first.wait_for(timeout=READ_TIMEOUT_MS)
    if drafts is not None:
        drafts_input = page.locator("#drafts input[type=number]")
        drafts_input.fill(str(drafts))
        drafts_input.press("Enter")
    page.evaluate(
        """() => {
            window.readWentBusy = false;
            const button = document.querySelector('#read');
            new MutationObserver(() => { if (button.disabled) window.readWentBusy = true; })
                .observe(button, {attributes: true});
        }"""
    )
    page.locator("#read").click()
    page.wait_for_function(
        """() => {
            const text = document.querySelector('#progress').innerText;
            return window.readWentBusy && !document.querySelector('#read').disabled
                && (text.startsWith('Done:') || text.startsWith('Nothing was read'));
        }""",
        timeout=READ_TIMEOUT_MS,
    )
    return page.locator("#progress").inner_text()


def choose_page(page, label: str) -> None:
    """Pick a page in the page selector, as a user does."""
    page.locator("#page-select input").click()
    page.get_by_role("option", name=label).click()
    page.locator("#page-select input").blur()
