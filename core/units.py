"""How modelmon writes a byte count and a rate, in every layer's words: decimal units for
bytes moved (as MB/s are, and storage vendors), binary GiB for RAM (as ``free -h`` shows
it)."""

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


def rate_text(mbps: float, *, grouped: bool = False) -> str:
    """A rate in words, decimal as storage is sold: "1320 MB/s", "4.2 MB/s" under 10, and
    under 1 MB/s in kB/s ("85 kB/s", "9.6 kB/s"): a 10 kB/s bucket is never "0 MB/s".
    ``grouped``: thousands separated ("1,320 MB/s"), where a page writes them so."""
    number, unit = _rate_parts(mbps, grouped)
    return f"{number} {unit}"


def rate_figure(mbps: float) -> float:
    """A rate in MB/s as a record or config file keeps it: one decimal from 1 MB/s, three
    significant digits under it, so that a 9.8 kB/s bucket is 0.00982, never 0.0."""
    if mbps >= 1 or mbps <= 0:
        return round(mbps, 1)
    return float(f"{mbps:.3g}")


def rate_span_text(low: float, high: float) -> str:
    """Runs' rates from ``low`` to ``high`` as ``rate_text`` writes them: "576–707 MB/s",
    "12–15 kB/s", "850 kB/s–1.2 MB/s"."""
    (low_number, low_unit), (high_number, high_unit) = _rate_parts(low), _rate_parts(high)
    if low_unit == high_unit:
        return f"{low_number}–{high_number} {high_unit}"
    return f"{rate_text(low)}–{rate_text(high)}"


def _rate_parts(mbps: float, grouped: bool = False) -> tuple[str, str]:
    # Words from the figure a record keeps: a rate said from the raw value and the same rate
    # said from its record (361.46 kept as 361.5) are then the same words (361 and 362 not).
    mbps = rate_figure(mbps)
    if mbps >= 9.95:
        return (f"{mbps:,.0f}" if grouped else f"{mbps:.0f}"), "MB/s"
    if mbps >= 0.9995:
        return f"{mbps:.1f}", "MB/s"
    kbps = max(mbps, 0.0) * 1000
    if kbps == 0:
        return "0", "kB/s"
    return (f"{kbps:.0f}" if kbps >= 9.95 else f"{kbps:.1f}"), "kB/s"
