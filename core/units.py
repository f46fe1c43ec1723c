"""How modelmon writes a byte count, in every layer's words: decimal units for bytes moved
(as MB/s are, and storage vendors), binary GiB for RAM (as ``free -h`` shows it)."""

from __future__ import annotations


def human_bytes(count: float) -> str:
    """Decimal units, like storage vendors and MB/s: 1 GB = 10^9 bytes."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(count) < 1000 or unit == "TB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.2f} {unit}"
        count /= 1000
    return f"{count:.2f} TB"


def gib_text(count: float) -> str:
    """Bytes of RAM as people read them off ``free -h``: binary GiB, "1.5 GiB"."""
    return f"{count / 2**30:.1f} GiB"


def rate_text(bytes_per_second: float) -> str:
    """A rate in decimal units: '77 MB/s', '1,830 MB/s'; under 1 MB/s in kB/s ('12 kB/s'),
    never '0 MB/s'."""
    if bytes_per_second >= 1e6:
        return f"{bytes_per_second / 1e6:,.0f} MB/s"
    return f"{bytes_per_second / 1e3:,.1f} kB/s"
