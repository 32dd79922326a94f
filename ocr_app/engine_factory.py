"""Starting an engine: the backend asked for, wrapped so that looping pages are read again and, for a
model whose preset has `regions`, so that a page is read as bands.

It lives above the engines and their wrappers (`ocr_app.repetition`, `ocr_app.regions`), which import
only the protocol, so that no wrapper imports the package that builds it.
"""

from __future__ import annotations

import importlib.util

from ocr_app.config import ModelPreset, engine_defaults
from ocr_app.engines.protocol import AUTO_DRAFTS, ENGINE_NAMES, Drafts, Engine
from ocr_app.errors import ConfigError
from ocr_app.regions import ReadByRegions
from ocr_app.repetition import RetryDegenerate


# The package each engine runs on: an engine is installed when its package is.
ENGINE_PACKAGES = {"hf": "transformers", "vllm": "vllm"}


def quiet_libraries() -> None:
    """Keep stderr for our own progress and errors (commands, Ray replicas): no load bars or kernel-fallback notes."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def installed(name: str) -> bool:
    return importlib.util.find_spec(ENGINE_PACKAGES[name]) is not None


def default_engine(folder: bool, servers: tuple[str, ...] = ()) -> str:
    """The engine for a run with no --engine: `vllm` when pages go to `vllm serve` endpoints, else the first
    installed of configs/defaults.toml's `[engine]` list for folders or for single documents."""
    if servers:
        return "vllm"
    defaults = engine_defaults()
    candidates = defaults.folder if folder else defaults.document
    chosen = next((name for name in candidates if installed(name)), None)
    if chosen is None:
        raise ConfigError(f"none of the engines {', '.join(candidates)} is installed")
    return chosen


def make_engine(name: str, model: ModelPreset, drafts: Drafts = 0, servers: tuple[str, ...] = ()) -> Engine:
    """Start an engine; heavy imports happen only for the engine asked for.

    `drafts` is the K the engine starts with (vLLM fixes it at start);
    `servers` sends pages to running `vllm serve` endpoints instead.  Every
    engine is wrapped so that pages stuck in a repetition loop are read again,
    and, for a model whose preset has `regions`, so that a page is read as bands.
    """
    if servers and name != "vllm":
        raise ConfigError("--server sends pages to `vllm serve`; use it with --engine vllm")
    if servers and drafts == AUTO_DRAFTS:
        raise ConfigError("--drafts auto cannot choose K for a running `vllm serve` (its K is set when it starts); "
                          "give --drafts K as the server runs")
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
    return ReadByRegions(engine, model.regions, model.pixels) if model.regions is not None else engine
