"""Live plots of a load (pyqtgraph): throughput, access pattern, per-block timeline."""

from __future__ import annotations
