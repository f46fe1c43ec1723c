"""Text wrapped to a width that whoever draws it measures (Qt's font metrics for a PNG,
matplotlib's for a figure): every word kept whole where it fits, never cut mid-number,
nothing elided. Qt-free."""

from __future__ import annotations

from collections.abc import Callable

# A word longer than a line (a long path, a command's argument) is broken after one of
# these where it can be.
BREAK_AFTER = "/\\,;:=&|_-+."

Fits = Callable[[str], bool]  # the text fits on one line


def _in_number(word: str, cut: int) -> bool:
    """Cutting ``word`` before index ``cut`` would split a number ("12|34", "1,|234", "0.|5")."""

    def numeric(i: int) -> bool:
        if not 0 <= i < len(word):
            return False
        if word[i].isdigit():
            return True
        inside = 0 < i < len(word) - 1
        return word[i] in ".," and inside and word[i - 1].isdigit() and word[i + 1].isdigit()

    return numeric(cut - 1) and numeric(cut)


def _longest_prefix(word: str, fits: Fits) -> int:
    """How many of ``word``'s first characters fit on a line (at least one)."""
    low, high = 1, len(word)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(word[:middle]):
            low = middle
        else:
            high = middle - 1
    return low


def _cut(word: str, fits: Fits) -> int:
    """Where to break ``word``, too long for a line: after a separator that fits, else
    after the last character that fits; never inside a number (one longer than a line
    stays whole: the break comes after it). ``len(word)``: nowhere."""
    most = _longest_prefix(word, fits)
    allowed = [cut for cut in range(most, 0, -1) if not _in_number(word, cut)]
    for cut in allowed:
        if word[cut - 1] in BREAK_AFTER:
            return cut
    if allowed:
        return allowed[0]
    return next((c for c in range(most + 1, len(word)) if not _in_number(word, c)), len(word))


def wrap_to(text: str, fits: Fits) -> list[str]:
    """``text`` on the fewest lines ``fits`` allows, broken at spaces; a word that cannot
    fit a line of its own is broken inside (``_cut``). An empty text is one empty line."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        joined = f"{line} {word}" if line else word
        if fits(joined):
            line = joined
            continue
        if line:
            lines.append(line)
        while len(word) > 1 and not fits(word):
            cut = _cut(word, fits)
            if cut >= len(word):
                break
            lines.append(word[:cut])
            word = word[cut:]
        line = word
    lines.append(line)
    return lines
