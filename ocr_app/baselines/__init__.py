"""Classical OCR engines scored beside the model, with the same pages and the same scorer."""
