from __future__ import annotations

from modelmon.cli import main

raise SystemExit(main())
