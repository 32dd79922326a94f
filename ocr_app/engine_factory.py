"""Starting an engine: the backend asked for, wrapped so that looping pages are read again and, for a
model whose preset has `regions`, so that a page is read as bands.

It lives above the engines and their wrappers (`ocr_app.repetition`, `ocr_app.regions`), which import
only the protocol, so that no wrapper imports the package that builds it.
"""

from __future__ import annotations

from ocr_app.config import ModelPreset
from ocr_app.engines.protocol import ENGINE_NAMES, Engine
from ocr_app.errors import ConfigError
from ocr_app.regions import ReadByRegions
from ocr_app.repetition import RetryDegenerate


def make_engine(name: str, model: ModelPreset, drafts: int = 0, servers: tuple[str, ...] = ()) -> Engine:
    """Start an engine; heavy imports happen only for the engine asked for.

    `drafts` is the K the engine starts with (vLLM fixes it at start);
    `servers` sends pages to running `vllm serve` endpoints instead.  Every
    engine is wrapped so that pages stuck in a repetition loop are read again,
    and, for a model whose preset has `regions`, so that a page is read as bands.
    """
    if servers and name != "vllm":
        raise ConfigError("--server sends pages to `vllm serve`; use it with --engine vllm")
    if servers:
        from ocr_app.engines.remote import RemoteEngine

        engine = RemoteEngine(model, servers)
    elif name == "hf":
        from ocr_app.engines.hf import HFEngine

        engine = HFEngine(model)
    elif name == "vllm":
        from ocr_app.engines.vllm import VllmEngine

        engine = VllmEngine(model, drafts)
    else:
        raise ConfigError(f"unknown engine '{name}' (engines: {', '.join(ENGINE_NAMES)})")
    engine = RetryDegenerate(engine, model.retry)
    return ReadByRegions(engine, model.regions, model.pixels.factor) if model.regions is not None else engine
