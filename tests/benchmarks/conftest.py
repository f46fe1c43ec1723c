"""``benchmarks`` is the repository's, not an installed package: its tests import it from the
repository root."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
