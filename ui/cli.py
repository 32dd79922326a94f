"""`ocr-ui`: serve the web UI.

    ocr-ui --model tiny-random --engine hf            # http://127.0.0.1:7860

The engine is loaded once, before the server starts, and shared by every
visitor.  The server binds to loopback unless told otherwise; uploads and
result files live in one temporary folder that is removed on exit.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

from ocr_app.cli.common import ENGINE_HELP, MODEL_HELP, report_errors
from ocr_app.config import default_model_name, load_model_preset
from ocr_app.engine_factory import make_engine, quiet_libraries
from ocr_app.errors import OcrError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def _stop_on_sigterm() -> None:
    """SIGTERM ends the server like Ctrl+C does, so the temporary folder is removed."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@app.command()
def serve(
    model: Annotated[Optional[str], typer.Option(help=MODEL_HELP)] = None,
    engine: Annotated[str, typer.Option(help=ENGINE_HELP)] = "hf",
    host: Annotated[str, typer.Option(help="Address to listen on; anything but loopback opens the UI to the network.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 7860,
    max_pages: Annotated[int, typer.Option(help="Most pages read per request, over all its documents.")] = 50,
    max_upload_mb: Annotated[float, typer.Option(help="Largest uploaded file accepted, in MB.")] = 50.0,
) -> None:
    """Serve the OCR web UI."""
    # Before Gradio is imported: no usage reports and no version checks.
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    quiet_libraries()
    work_root = Path(tempfile.mkdtemp(prefix="ocr-ui-"))
    # Gradio writes every upload under this folder, and only files under it are read.
    upload_root = work_root / "uploads"
    os.environ["GRADIO_TEMP_DIR"] = str(upload_root)
    _stop_on_sigterm()
    try:
        with report_errors():
            if max_pages < 1 or max_upload_mb <= 0:
                raise OcrError("--max-pages and --max-upload-mb must be positive")
            model_preset = load_model_preset(model or default_model_name())
            reader = make_engine(engine, model_preset)
            try:
                from ui.app import CSS, Limits, build_app  # Gradio only once its environment is set

                limits = Limits(max_pages=max_pages, max_upload_mb=max_upload_mb)
                blocks = build_app(reader, engine, model_preset, limits, upload_root, work_root)
                if not _is_loopback(host):
                    print(f"warning: listening on {host}: anyone who can reach this port can use the UI", file=sys.stderr)
                print(f"ocr-ui: {model_preset.name} on {engine}, serving http://{host}:{port} (Ctrl+C stops)", file=sys.stderr)
                _launch(blocks.queue(max_size=64), host, port, max_upload_mb, CSS)
            finally:
                reader.close()
    finally:
        shutil.rmtree(work_root, ignore_errors=True)


def _launch(blocks, host: str, port: int, max_upload_mb: float, css: str) -> None:
    """Serve until Ctrl+C or SIGTERM: no share link, no server-side rendering, no MCP, no PWA."""
    try:
        blocks.launch(
            server_name=host,
            server_port=port,
            share=False,
            max_file_size=int(max_upload_mb * 1024 * 1024),
            ssr_mode=False,
            pwa=False,
            mcp_server=False,
            enable_monitoring=False,
            quiet=True,
            css=css,
        )
    except OSError as exc:  # the port is taken, or the address is not ours
        raise OcrError(f"cannot serve on {host}:{port}: {str(exc).splitlines()[0]}") from None


def main() -> None:
    app()


if __name__ == "__main__":
    main()
