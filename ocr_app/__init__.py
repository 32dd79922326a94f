"""ocr_app: documents to Markdown with a Qwen3.5 OCR model and its MTP head."""

__version__ = "0.1.0"
