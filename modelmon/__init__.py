"""modelmon: why model weights load slowly, measured on your own file, disk and RAM."""

from __future__ import annotations

__version__ = "0.1.0"
