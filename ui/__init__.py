"""`ocr-ui`: the Gradio web UI, a thin shell over the `ocr_app` library.

`reading` runs one read request (uploads -> pipeline -> what the page shows),
`app` lays out the page and wires its events, `cli` loads the engine once and
serves the app.
"""
