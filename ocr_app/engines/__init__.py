"""Engines: the backends that read page images.

    protocol.py  the `Engine` protocol, `GenerationSettings`, `PageText` and the wrapper base
    hf.py        transformers, with the project's own MTP speculative decoding (ocr_app.speculative)
    vllm.py      vLLM in-process, with its MTP drafting
    vllm_loop_ban.py  the vLLM plugin that holds `ban_loops` at every drafted position
    remote.py    running `vllm serve` endpoints over HTTP

`ocr_app.engine_factory.make_engine` starts one and wraps it (re-reads, bands).
"""
