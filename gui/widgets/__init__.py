"""The window's panels: model facts, load configuration, progress, results, messages."""

from __future__ import annotations
