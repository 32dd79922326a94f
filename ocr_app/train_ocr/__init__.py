"""Training the project's own small Turkish OCR model from scratch on `ocr_app.synth` documents.

    from ocr_app.train_ocr.config import load_train_config
    from ocr_app.train_ocr.trainer import train
    train(load_train_config(path), output_dir, budget)

`config` is the typed recipe (`configs/train_ocr.toml`), `data` turns a data
position into a batch (curriculum from words to pages), `trainer` runs the
resumable loop and `export` writes a Hugging Face model folder from a checkpoint.
"""
