"""Reading through a `vllm serve` started here on loopback, with the predictable model (exact MTP head)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from ocr_app.config import load_model_preset
from ocr_app.engines.protocol import GenerationSettings
from ocr_app.engines.remote import TIMEOUT, RemoteEngine, serve_command
from ocr_app.errors import OcrError
from ocr_app.metrics import SpecDecodingStats
from tests.conftest import PROJECT_ROOT, SAMPLE_PDF
from tests.vllm_support import VLLM_TEST_ENV, sample_page_images

pytestmark = pytest.mark.slow
DRAFTS = 3
SETTINGS = GenerationSettings(max_tokens=32, drafts=DRAFTS)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def preset(predictable_model_dir):
    return load_model_preset(predictable_model_dir)


@pytest.fixture(scope="module")
def server_url(preset, tmp_path_factory):
    port = free_port()
    log_path = tmp_path_factory.mktemp("server") / "vllm-serve.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": VLLM_TEST_ENV["VLLM_CPU_KVCACHE_SPACE"]}
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [*serve_command(preset, DRAFTS, port=port), "--enforce-eager"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 400
        while True:
            assert server.poll() is None, f"vllm serve exited: {log_path.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "vllm serve did not come up"
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(2)
        yield url
    finally:
        # The server's engine runs in processes of its own session: end them all.
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@pytest.fixture(scope="module")
def engine(preset, server_url):
    engine = RemoteEngine(preset, [server_url])
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def pages(preset):
    return sample_page_images(preset)


def test_streamed_page_is_the_model_text_with_every_draft_accepted(engine, pages, predictable_model_dir, preset):
    pieces: list[str] = []
    page = engine.read(pages[0], SETTINGS, on_text=pieces.append)
    assert len(pieces) > 1 and "".join(pieces) == page.text
    permutation = json.loads((predictable_model_dir / "next_token_permutation.json").read_text())
    assert len(page.token_ids) == SETTINGS.max_tokens
    assert all(permutation[a] == b for a, b in zip(page.token_ids, page.token_ids[1:]))
    spec = page.metrics.spec
    assert page.metrics.drafts == DRAFTS
    assert spec.num_drafts > 0 and spec.acceptance_rate_per_position == [1.0] * DRAFTS
    # The server renders the same prompt and image tokens as the engines in this process.
    from ocr_app.engines.hf import HFEngine

    hf = HFEngine(preset)
    assert page.metrics.prompt_tokens == hf.read(pages[0], GenerationSettings(max_tokens=1)).metrics.prompt_tokens
    assert page.token_ids == engine.read(pages[0], SETTINGS).token_ids  # streamed or not, the same page


def test_bulk_pages_and_server_counters_agree(engine, pages):
    before = engine.spec_totals()
    results = dict(engine.read_many(((index, pages[index % 2]) for index in range(6)), SETTINGS, concurrency=4))
    assert sorted(results) == list(range(6))
    assert results[0].token_ids == results[2].token_ids == results[4].token_ids
    merged = SpecDecodingStats()
    for page in results.values():
        merged.merge(page.metrics.spec)
    after = engine.spec_totals()
    assert merged.num_drafts > 0
    assert after.num_drafts - before.num_drafts == merged.num_drafts
    assert [a - b for a, b in zip(after.accepted_per_position, before.accepted_per_position)] == merged.accepted_per_position


class FlakyTransport(httpx.BaseTransport):
    """Refuses the first `failures` connections, then passes requests to the real transport."""

    def __init__(self, failures: int):
        self.failures = failures
        self.attempts = 0
        self.real = httpx.HTTPTransport()

    def handle_request(self, request):
        self.attempts += 1
        if self.attempts <= self.failures:
            raise httpx.ConnectError("connection refused", request=request)
        return self.real.handle_request(request)


def test_connection_errors_are_retried(engine, pages, preset, server_url):
    expected = engine.read(pages[1], SETTINGS)
    flaky = RemoteEngine(preset, [server_url])
    transport = FlakyTransport(failures=2)
    flaky.client = httpx.Client(transport=transport, timeout=TIMEOUT)  # the engine's own, not httpx's 5 s
    page = flaky.read(pages[1], SETTINGS)
    assert transport.attempts == 3 and page.token_ids == expected.token_ids
    flaky.close()


def test_unreachable_server_is_one_clear_error(preset):
    with pytest.raises(OcrError, match="no vLLM server at http://127.0.0.1:"):
        RemoteEngine(preset, [f"http://127.0.0.1:{free_port()}"])


def test_cli_reads_through_server(server_url, predictable_model_dir, tmp_path):
    out = tmp_path / "out.json"
    result = subprocess.run(
        [
            sys.executable, "-m", "ocr_app.cli.read", str(SAMPLE_PDF), "--engine", "vllm", "--server", server_url,
            "--model", str(predictable_model_dir), "--mode", "bulk", "--max-tokens", "24", "--format", "json", "-o", str(out),
        ],
        cwd=PROJECT_ROOT, env={**os.environ, **VLLM_TEST_ENV}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())
    assert [page["page"] for page in document["pages"]] == [1, 2]
    for page in document["pages"]:
        assert page["metrics"]["spec"]["acceptance_rate_per_position"] == [1.0] * DRAFTS
    assert "MTP: mean acceptance length 4.00" in result.stderr
