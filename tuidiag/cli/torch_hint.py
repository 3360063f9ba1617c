"""What a command that needs torch says when torch is missing: how to install it, the CPU-only build first.

``pip install 'tuidiag[torch]'`` on a Linux machine pulls the default torch wheel
from PyPI, which bundles several GB of CUDA libraries even where there is no GPU.
The hint names PyTorch's CPU-only index first; once torch is installed, the extra
finds its requirement satisfied and installs nothing more.
"""

from __future__ import annotations

import sys

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
"""PyTorch's package index of CPU-only wheels."""


def hint(command: str) -> str:
    """The message for ``tuidiag COMMAND`` without torch (several lines, no trailing newline)."""
    return (f"tuidiag {command} needs torch, which is not installed (tuidiag itself reads and shows runs without it).\n"
            f"  CPU only (no CUDA libraries; about 0.75 GB installed instead of several GB):\n"
            f"    pip install torch --index-url {CPU_INDEX}\n"
            f"    pip install 'tuidiag[torch]'\n"
            f"  with an NVIDIA GPU:\n"
            f"    pip install 'tuidiag[torch]'")


def torch_missing() -> bool:
    """True when ``import torch`` fails with an ``ImportError`` (not installed, or blocked)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return True
    return False


def refuse_without_torch(command: str) -> bool:
    """Print :func:`hint` on stderr and return True when torch is missing; False when it is there."""
    if not torch_missing():
        return False
    print(hint(command), file=sys.stderr)
    return True
