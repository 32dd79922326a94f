"""The start-up hooks every interpreter of the environment runs (`ocr_app/cpu_hooks.py`, installed by the setup)."""

from __future__ import annotations

import subprocess
import sys

from ocr_app.cpu_hooks import GDN_MODULE


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
