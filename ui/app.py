"""The page: uploads and settings on the left; on the right, errors first, then progress, each page's image
beside its text (rendered Markdown or raw), the figures and the downloads.

Handlers are thin: they call `ui.reading` (which calls the library) and map its
`Reading` onto components.  The engine is made once by the caller and shared
by every visitor; the read event runs through Gradio's queue one at a time,
with the Read button disabled until it is over.
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from ocr_app.config import MODE_NAMES, ModelPreset, drafts_for, load_mode_preset
from ocr_app.engines.protocol import Engine, GenerationSettings
from ocr_app.errors import OcrError
from ocr_app.pages import DEFAULT_DPI
from ocr_app.pipeline import ReadJob
from ui.reading import (
    Reading,
    accept_uploads,
    describe_uploads,
    errors_html,
    figures_markdown,
    page_image,
    plan_documents,
    progress_markdown,
    run_reading,
)

EMPTY_STATUS = "Drop PDFs or images on the left, then press **Read**."
# A request that reads nothing clears what the previous one showed (all outputs but errors and progress).
CLEARED = (gr.Dropdown(choices=[], value=None), None, "", "", "", [], None)
CSS = """
/* Errors: a box of their own, above everything else on the right. */
.ocr-errors { border: 1px solid var(--error-border-color); background: var(--error-background-fill);
  color: var(--error-text-color); border-radius: var(--radius-lg); padding: 10px 14px; }
.ocr-errors ul { margin: 4px 0 0 0; padding-left: 20px; }
#progress { font-size: var(--text-lg); }
#progress progress { width: 100%; height: 10px; accent-color: var(--color-accent); }
/* Tables: words stay whole (Gradio's prose breaks them anywhere); a table wider than its column scrolls. */
#page-markdown table, #figures table { display: block; overflow-x: auto; }
#page-markdown th, #page-markdown td, #figures th, #figures td {
  word-break: normal !important; overflow-wrap: normal !important; }
#figures td { white-space: nowrap; }
/* Thumbnails in the shape of a page, whole. */
#thumbs .thumbnail-item { aspect-ratio: 3 / 4; }
"""


@dataclass(frozen=True)
class Limits:
    max_pages: int = 50  # pages read per request, over all its documents
    max_upload_mb: float = 50.0  # per uploaded file; Gradio refuses larger ones before they land


def build_app(
    engine: Engine, engine_name: str, model: ModelPreset, limits: Limits, upload_root: Path, work_root: Path
) -> gr.Blocks:
    """`upload_root` is where Gradio stores uploads (GRADIO_TEMP_DIR); result files go to `work_root`."""
    engine_lock = threading.Lock()
    default_mode = load_mode_preset(MODE_NAMES[0])

    def preview(files: list[str] | None):
        if not files:
            return [], "", ""
        try:
            thumbs, lines, errors = describe_uploads(accept_uploads(files, upload_root))
        except OcrError as exc:
            return [], "", errors_html([str(exc)])
        return thumbs, "\n\n".join(lines), errors_html(errors)

    def mode_drafts(mode: str) -> int:
        return drafts_for(model, load_mode_preset(mode))

    def read(files: list[str] | None, pages: str | None, mode: str, drafts: float, dpi: float):
        if not files:
            yield "", EMPTY_STATUS, *CLEARED
            return
        try:
            mode_preset = load_mode_preset(mode)
            settings = GenerationSettings(max_tokens=model.max_tokens, drafts=int(drafts))
            pages = (pages or "").strip() or None
            job = ReadJob(model=model, mode=mode_preset, settings=settings, pages=pages, dpi=int(dpi))
            planned, errors = plan_documents(accept_uploads(files, upload_root), job, limits.max_pages)
        except OcrError as exc:
            yield errors_html([str(exc)]), "Nothing was read.", *CLEARED
            return
        reading = Reading(
            model=model.name, engine=engine_name, mode=mode, drafts=settings.drafts, stream=mode_preset.stream, errors=errors
        )
        with tempfile.TemporaryDirectory(prefix="result-", dir=work_root) as out_dir:
            shown_page, shown_downloads = "", -1  # nothing of this request shown yet
            for reading in run_reading(planned, engine, engine_lock, reading, Path(out_dir)):
                final = reading.finished is not None
                new_page = reading.current != shown_page
                new_downloads = len(reading.downloads) != shown_downloads
                shown_page, shown_downloads = reading.current, len(reading.downloads)
                # Gradio copies returned files into its cache before the next step runs,
                # so the temporary folder may go once the last step is out.
                yield (
                    errors_html(reading.errors),
                    progress_markdown(reading),
                    gr.Dropdown(choices=list(reading.pages), value=reading.current),
                    _image_of(reading) if new_page or final else gr.skip(),
                    *_texts_of(reading),
                    figures_markdown(reading),
                    list(reading.downloads) if new_downloads or final else gr.skip(),
                    reading,
                )

    def show_page(label: str, reading: Reading | None):
        if reading is None or label not in reading.pages:
            return gr.skip(), gr.skip(), gr.skip()
        reading.current = label
        return _image_of(reading), *_texts_of(reading)

    with gr.Blocks(title="ocr_app", analytics_enabled=False, delete_cache=(1800, 3600)) as app:
        gr.Markdown(f"# ocr_app · documents to Markdown\nModel **{model.name}** on the **{engine_name}** engine.")
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                files = gr.File(
                    label=f"Documents: PDF or images (up to {limits.max_upload_mb:g} MB each)",
                    file_count="multiple",
                    elem_id="uploads",
                )
                uploaded = gr.Markdown(elem_id="uploaded")
                thumbs = gr.Gallery(
                    label="Pages", show_label=False, columns=3, height=280, object_fit="contain",
                    elem_id="thumbs", allow_preview=False,
                )
                pages = gr.Textbox(label="Pages to read (PDFs)", placeholder="all, or e.g. 1-3,7", elem_id="pages")
                with gr.Accordion("Settings", open=True):
                    gr.Textbox(value=model.name, label="Model preset (chosen at start: ocr-ui --model)", interactive=False)
                    mode = gr.Radio(list(MODE_NAMES), value=default_mode.name, label="Mode", elem_id="mode")
                    drafts = gr.Slider(
                        0, 7, value=drafts_for(model, default_mode), step=1,
                        label="Drafts (MTP draft tokens per step; 0 = off)", elem_id="drafts",
                    )
                    dpi = gr.Slider(72, 400, value=DEFAULT_DPI, step=1, label="DPI (PDF rendering)", elem_id="dpi")
                read_button = gr.Button("Read", variant="primary", elem_id="read")
            with gr.Column(scale=3):
                errors = gr.HTML(elem_id="errors", padding=False, container=False)
                progress = gr.Markdown(EMPTY_STATUS, elem_id="progress")
                page_select = gr.Dropdown(choices=[], label="Page", interactive=True, elem_id="page-select")
                with gr.Row(equal_height=False):
                    page_view = gr.Image(
                        label="Page image", interactive=False, height=620, scale=2, min_width=280, elem_id="page-image"
                    )
                    with gr.Column(scale=3, min_width=380), gr.Tabs(elem_id="page-text"):
                        with gr.Tab("Rendered Markdown"):
                            page_md = gr.Markdown(
                                container=True, height=560, latex_delimiters=[], elem_id="page-markdown"
                            )
                        with gr.Tab("Raw text"):
                            page_raw = gr.Textbox(
                                show_label=False, lines=24, max_lines=24, interactive=False, buttons=["copy"],
                                elem_id="page-raw",
                            )
                figures = gr.Markdown(elem_id="figures")
                downloads = gr.File(
                    label="Downloads (.md, .json)", file_count="multiple", interactive=False, height=140, elem_id="downloads"
                )
        state = gr.State(None)

        files.change(preview, files, [thumbs, uploaded, errors], api_visibility="private", concurrency_limit=4)
        mode.change(mode_drafts, mode, drafts, api_visibility="private")
        # The button is disabled at once (no queue) and enabled again once the read is over, however it ended.
        read_button.click(
            lambda: gr.Button(interactive=False), None, read_button, queue=False, api_visibility="private"
        ).then(
            read,
            [files, pages, mode, drafts, dpi],
            [errors, progress, page_select, page_view, page_md, page_raw, figures, downloads, state],
            api_name="read",
            concurrency_limit=1,
            concurrency_id="engine",
            show_progress="minimal",  # Gradio's own marks (queue position) on the progress line only
            show_progress_on=progress,
        ).then(lambda: gr.Button(interactive=True), None, read_button, queue=False, api_visibility="private")
        page_select.input(show_page, [page_select, state], [page_view, page_md, page_raw], api_visibility="private")
    return app


def _image_of(reading: Reading):
    entry = reading.pages.get(reading.current) if reading.current else None
    return page_image(entry.upload, entry.number) if entry is not None else None


def _texts_of(reading: Reading) -> tuple[str, str]:
    """The current page's text, rendered and raw (its error if it failed)."""
    entry = reading.pages.get(reading.current) if reading.current else None
    if entry is None:
        return "", ""
    if entry.error is not None:
        return f"**error:** {entry.error}", entry.error
    return entry.text, entry.text
