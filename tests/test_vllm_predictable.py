"""An MTP head that predicts the main model exactly: every draft is accepted and the text never changes."""

from __future__ import annotations

import json

import pytest

from tests.vllm_support import sample_page_images, use_test_env

use_test_env()

from ocr_app.config import load_model_preset  # noqa: E402
from ocr_app.engines.protocol import GenerationSettings  # noqa: E402
from ocr_app.engines.vllm import VllmEngine  # noqa: E402

pytestmark = pytest.mark.slow
MAX_TOKENS = 40


@pytest.fixture(scope="module")
def preset(predictable_model_dir):
    return load_model_preset(predictable_model_dir)


@pytest.fixture(scope="module")
def engine(preset):
    engine = VllmEngine(preset, drafts=0, enforce_eager=True)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def image(preset):
    return sample_page_images(preset, count=1)[0]


@pytest.fixture(scope="module")
def plain(engine, image, predictable_model_dir):
    page = engine.read(image, GenerationSettings(max_tokens=MAX_TOKENS, drafts=0))
    permutation = json.loads((predictable_model_dir / "next_token_permutation.json").read_text())
    # The model is what it claims: each token is the permutation of the one before.
    assert len(page.token_ids) == MAX_TOKENS
    assert all(permutation[a] == b for a, b in zip(page.token_ids, page.token_ids[1:]))
    return page


@pytest.mark.parametrize("drafts", [1, 2, 3, 4, 5])
def test_exact_head_is_always_accepted_and_changes_nothing(engine, image, plain, drafts):
    page = engine.read(image, GenerationSettings(max_tokens=MAX_TOKENS, drafts=drafts))
    assert page.token_ids == plain.token_ids and page.text == plain.text
    spec = page.metrics.spec
    assert spec.num_drafts > 0 and spec.num_accepted_tokens == spec.num_draft_tokens == drafts * spec.num_drafts
    assert spec.acceptance_rate_per_position == [1.0] * drafts
    assert spec.mean_acceptance_length == 1 + drafts
