"""Text wrapped to a measured width (an export's heading): whole, within the width, never
cut mid-number, never elided."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from modelmon.gui.state.text_wrap import wrap_to


def within(width: int):
    return lambda line: len(line) <= width


def test_words_wrap_at_spaces_and_a_short_text_is_one_line():
    assert wrap_to("run A: pread workers=4", within(80)) == ["run A: pread workers=4"]
    assert wrap_to("run A: pread workers=4", within(12)) == ["run A: pread", "workers=4"]
    assert wrap_to("", within(10)) == [""]


def test_a_long_path_breaks_after_its_slashes():
    path = "/home/ada/models/llama-3b/model.safetensors"
    lines = wrap_to(f"cmd: python {path}", within(12))
    assert (
        lines[0] == "cmd: python"
        and "".join(lines[1:]) == path
        and all(len(line) <= 12 for line in lines)
    )
    assert all(line.endswith(("/", "-", ".")) for line in lines[1:-1]), lines


def test_a_number_is_never_cut():
    assert wrap_to("x=123456789abc", within(6)) == ["x=", "123456789", "abc"]
    assert wrap_to("read 1,234,567 MB", within(7)) == ["read", "1,234,567", "MB"]
    assert wrap_to("a0.5b", within(3)) == ["a", "0.5", "b"]


@given(
    st.lists(
        st.one_of(
            st.from_regex(r"[a-z/=_-]{1,30}", fullmatch=True),
            st.from_regex(r"[0-9]{1,4}(,[0-9]{3}){0,2}(\.[0-9]{1,3})?", fullmatch=True),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(min_value=4, max_value=40),
)
def test_every_character_stays_every_number_whole_and_lines_fit(words: list[str], width: int):
    text = " ".join(words)
    lines = wrap_to(text, within(width))
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")  # whole, nothing added
    numbers = [w for w in words if w[0].isdigit()]
    for number in numbers:  # each number on one line, as written
        assert any(number in line for line in lines), (number, lines)
    for line in lines:  # a line longer than the width holds a number longer than it
        assert len(line) <= width or any(len(n) > width and n in line for n in numbers), lines
