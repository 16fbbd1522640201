"""Checks shared by the GPU backends, made without importing any framework (so `available()` never raises)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def nvidia_gpu_reason() -> str | None:
    """None when an NVIDIA GPU and its driver are visible, else why not."""
    if not Path("/dev/nvidiactl").exists() and shutil.which("nvidia-smi") is None:
        return "no NVIDIA GPU or driver found (no /dev/nvidiactl, no nvidia-smi)"
    if shutil.which("nvidia-smi") is not None:
        try:
            listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            return f"nvidia-smi failed ({exc}); is the NVIDIA driver loaded?"
        if "GPU" not in listing:
            return "nvidia-smi lists no GPU"
    return None


def gpu_name() -> str:
    """The first GPU's name as nvidia-smi reports it ('unknown' when it cannot say)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.strip().splitlines()[0].strip() if out.strip() else "unknown"
