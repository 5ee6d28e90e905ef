"""Which device runs the embedding model (``embedding.device``), decided without importing torch.

``auto`` takes the first CUDA GPU when one is usable and the CPU otherwise. The fast path
(ONNX Runtime on the CPU) must not pay torch's import to learn that there is no GPU, so
``auto`` first looks for what a GPU needs without torch: an NVIDIA device node and a torch
build made with CUDA (its ``version.py`` names a CUDA version). Only when both are there is
torch asked (``torch.cuda.is_available()``), and it has the last word.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

from rmtui.engine.memory.config_schema import check_device

#: texts per forward pass and per request batch on each kind of device: a GPU is fed large
#: batches (it is idle between them), the CPU small ones (latency of a single query matters)
CPU_ENCODE_BATCH = 32
GPU_ENCODE_BATCH = 256
CPU_REQUEST_BATCH = 64
GPU_REQUEST_BATCH = 1024


def torch_built_with_cuda() -> bool:
    """Whether the installed torch is a CUDA build, read from its version file (no import)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        text = version_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*(.+)$", text, re.MULTILINE)
    return m is not None and m.group(1).strip() not in ("None", "''", '""')


def gpu_present() -> bool:
    """An NVIDIA GPU's device node or driver, as the kernel shows it."""
    return Path("/dev/nvidia0").exists() or Path("/proc/driver/nvidia/version").exists()


def resolve_device(setting: str | None) -> str:
    """The device to load the model on: ``cpu`` or ``cuda[:N]`` (``auto``: see the module)."""
    setting = setting or "auto"
    if check_device(setting) is not None:
        raise ValueError(f"embedding.device {check_device(setting)}")
    if setting != "auto":
        return setting
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return "cpu"
    if not (gpu_present() and torch_built_with_cuda()):
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def is_gpu(device: str) -> bool:
    return device.startswith("cuda")


def encode_batch(device: str) -> int:
    return GPU_ENCODE_BATCH if is_gpu(device) else CPU_ENCODE_BATCH


def request_batch(device: str) -> int:
    return GPU_REQUEST_BATCH if is_gpu(device) else CPU_REQUEST_BATCH
