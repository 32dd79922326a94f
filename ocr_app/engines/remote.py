"""The remote engine: pages sent to running OpenAI-compatible `vllm serve` endpoints.

The same page as the in-process engine, asked the same way: the image (PNG,
lossless, already fitted to the preset's pixel budget) and the preset's
instruction in one user message, rendered by the server with the model's chat
template (thinking off).  The server decides what the in-process engine takes
from the preset: K drafts (`--speculative-config`) and the image processor's
pixel budget (`--mm-processor-kwargs`; vLLM refuses it per request unless
started with `--trust-request-mm-kwargs`); `serve_command` writes that line.  A server started with
`--per-request-spec-decode-metrics summary` returns each page's acceptance
counters; every server's Prometheus `/metrics` gives the run's totals.

Pages go to the server with the fewest in flight; a connection that fails
before any text arrived is retried with exponential backoff.
"""

from __future__ import annotations

import base64
import io
import itertools
import sys
import json
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

import httpx
from PIL import Image
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from ocr_app.config import ModelPreset
from ocr_app.engines.protocol import GenerationSettings, Key, PageText, TextCallback
from ocr_app.engines.spec_counters import difference, from_acceptance_histogram, from_prometheus_text
from ocr_app.errors import ConfigError, OcrError
from ocr_app.metrics import PageMetrics, SpecDecodingStats
from ocr_app.prompts import page_messages

ATTEMPTS = 5
TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=None)
# Failures of the connection itself; an HTTP error answer is the server's word and is not retried.
RETRIED = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError)
with_backoff = retry(
    retry=retry_if_exception_type(RETRIED),
    stop=stop_after_attempt(ATTEMPTS),
    wait=wait_exponential(multiplier=0.5, max=8),
    reraise=True,
)


def image_data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def page_spec_stats(body: dict) -> SpecDecodingStats | None:
    """A request's counters from the response's `metrics.speculative_decoding`, if the server gave them."""
    counters = (body.get("metrics") or {}).get("speculative_decoding")
    if not counters:
        return None
    return from_acceptance_histogram(counters["acceptance_histogram"], counters["num_draft_tokens"])


class PartialStream(OcrError):
    """The connection broke after text was streamed; retrying would repeat it."""


class Server:
    """One endpoint: its served model name, pages in flight, and the counters it had when we began."""

    def __init__(self, url: str, client: httpx.Client):
        self.url = url.rstrip("/")
        self.client = client
        self.in_flight = 0
        try:
            models = with_backoff(self.client.get)(f"{self.url}/v1/models").raise_for_status().json()["data"]
            self.model = models[0]["id"]
            self.counters_at_start = self.spec_counters()
        except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
            raise OcrError(f"no vLLM server at {self.url}: {exc}") from None

    def spec_counters(self) -> SpecDecodingStats:
        return from_prometheus_text(with_backoff(self.client.get)(f"{self.url}/metrics").raise_for_status().text)


class RemoteEngine:
    name = "vllm"
    bans_loops = False  # a served request cannot carry `vllm_loop_ban`'s flag: looping pages are re-read sampled

    def __init__(self, model: ModelPreset, urls: Iterable[str]):
        if not model.use_chat_template:
            raise ConfigError("remote reading needs the model's chat template (use_chat_template = true)")
        self.preset = model
        self.client = httpx.Client(timeout=TIMEOUT)
        self.servers = [Server(url, self.client) for url in urls]
        self.lock = threading.Lock()

    def _request_body(self, image: Image.Image, settings: GenerationSettings, stream: bool) -> dict:
        messages = page_messages(self.preset.prompt)
        content = [
            {"type": "image_url", "image_url": {"url": image_data_url(image)}} if part["type"] == "image" else part
            for part in messages[0]["content"]
        ]
        body = {
            "messages": [{**messages[0], "content": content}],
            "max_tokens": settings.max_tokens,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "return_token_ids": True,
            "chat_template_kwargs": {"enable_thinking": False},
        }
        if settings.seed is not None:
            body["seed"] = settings.seed
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        return body

    def _pick_server(self) -> Server:
        with self.lock:
            server = min(self.servers, key=lambda s: s.in_flight)
            server.in_flight += 1
            return server

    def _post(self, body: dict, on_text: TextCallback | None) -> tuple[dict, list[int], str]:
        server = self._pick_server()
        try:
            url = f"{server.url}/v1/chat/completions"
            body = {**body, "model": server.model}
            if on_text is None:
                response = self.client.post(url, json=body)
                _raise_for_status(response, server)
                answer = response.json()
                choice = answer["choices"][0]
                return answer, choice.get("token_ids") or [], choice["message"]["content"] or ""
            return self._stream(url, body, on_text, server)
        finally:
            with self.lock:
                server.in_flight -= 1

    def _stream(self, url: str, body: dict, on_text: TextCallback, server: Server) -> tuple[dict, list[int], str]:
        token_ids: list[int] = []
        pieces: list[str] = []
        summary: dict = {"choices": [{}]}
        with self.client.stream("POST", url, json=body) as response:
            _raise_for_status(response, server)
            try:
                for line in response.iter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[len("data: ") :])
                    for choice in chunk.get("choices", []):
                        token_ids.extend(choice.get("token_ids") or [])
                        if choice.get("finish_reason"):
                            summary["choices"][0]["finish_reason"] = choice["finish_reason"]
                        text = (choice.get("delta") or {}).get("content")
                        if text:
                            pieces.append(text)
                            on_text(text)
                    for field in ("usage", "metrics"):
                        if chunk.get(field):
                            summary[field] = chunk[field]
            except RETRIED as exc:
                if pieces:
                    raise PartialStream(f"{server.url} broke off a streamed page: {exc}") from None
                raise
        return summary, token_ids, "".join(pieces)

    def _read(self, image: Image.Image, settings: GenerationSettings, on_text: TextCallback | None) -> PageText:
        body = self._request_body(image, settings, stream=on_text is not None)
        started = time.perf_counter()
        try:
            answer, token_ids, text = with_backoff(self._post)(body, on_text)
        except RETRIED as exc:
            raise OcrError(f"vLLM server unreachable after {ATTEMPTS} attempts: {exc}") from None
        wall_s = time.perf_counter() - started
        usage = answer.get("usage") or {}
        spec = page_spec_stats(answer)
        metrics = PageMetrics(
            prompt_tokens=usage.get("prompt_tokens", 0),
            output_tokens=usage.get("completion_tokens", len(token_ids)),
            wall_s=wall_s,
            finish_reason="length" if answer["choices"][0].get("finish_reason") == "length" else "stop",
            drafts=answer["metrics"]["speculative_decoding"]["num_spec_tokens"] if spec is not None else settings.drafts,
            spec=spec,
        )
        # vLLM returns the end-of-sequence token among the ids, not in the text; the other engines drop it.
        if metrics.finish_reason == "stop" and token_ids:
            token_ids = token_ids[:-1]
        return PageText(text=text, token_ids=tuple(token_ids), metrics=metrics)

    def read(self, image: Image.Image, settings: GenerationSettings, on_text: TextCallback | None = None) -> PageText:
        return self._read(image, settings, on_text)

    def read_many(
        self, pages: Iterable[tuple[Key, Image.Image]], settings: GenerationSettings, concurrency: int
    ) -> Iterator[tuple[Key, PageText]]:
        waiting = iter(pages)
        in_flight: dict[Future, Key] = {}
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="vllm-remote") as pool:
            try:
                while True:
                    for key, image in itertools.islice(waiting, concurrency - len(in_flight)):
                        in_flight[pool.submit(self._read, image, settings, None)] = key
                    if not in_flight:
                        return
                    done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield in_flight.pop(future), future.result()
            finally:
                for future in in_flight:
                    future.cancel()

    def spec_totals(self) -> SpecDecodingStats:
        """The servers' counters since this engine started, summed (assumes nobody else uses them)."""
        totals = SpecDecodingStats()
        for server in self.servers:
            totals.merge(difference(server.spec_counters(), server.counters_at_start))
        return totals

    def auto_drafts_report(self) -> None:
        return None  # the servers' K is set by `vllm serve`; `make_engine` refuses drafts auto with servers

    def close(self) -> None:
        self.client.close()


def _raise_for_status(response: httpx.Response, server: Server) -> None:
    if response.status_code >= 400:
        response.read()
        raise OcrError(f"{server.url} refused the page: HTTP {response.status_code} {response.text[:200]}")


def serve_command(model: ModelPreset, drafts: int, host: str = "127.0.0.1", port: int = 8000) -> list[str]:
    """The `vllm serve` line whose server reads pages as the in-process engine would for this preset.

    Written as `python -m vllm.entrypoints.openai.api_server`: the `vllm`
    console script of the CPU build fails to find its own package metadata.
    """
    from ocr_app.engines.vllm import max_model_len

    budget = model.pixels
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model.resolved_path()),
        "--host", host,
        "--port", str(port),
        "--dtype", "bfloat16",
        "--no-enable-prefix-caching",
        "--max-model-len", str(max_model_len(model)),
        "--limit-mm-per-prompt", json.dumps({"image": 1, "video": 0}),
        "--mm-processor-kwargs", json.dumps({"size": {"shortest_edge": budget.min_pixels, "longest_edge": budget.max_pixels}}),
    ]  # fmt: skip
    if drafts:
        command += [
            "--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": drafts}),
            "--per-request-spec-decode-metrics", "summary",
        ]  # fmt: skip
    return command
