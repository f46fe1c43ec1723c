from __future__ import annotations

import pytest

from modelmon.core.errors import OptionsError
from modelmon.core.options import (
    LoadOptions,
    format_spec,
    from_mapping,
    parse_readahead,
    parse_size,
    parse_spec,
)


@pytest.mark.parametrize(
    "bad",
    [
        {"workers": 0},
        {"workers": -2},
        {"threads": 1.5},
        {"workers": True},
        {"chunk": 10},
        {"fadvise": "fast"},
        {"cache": "hot"},
        {"partition": "random"},
        {"verify": "yes"},
        {"workers": 100000},
    ],
)
def test_bad_options_name_the_option(bad: dict[str, object]) -> None:
    with pytest.raises(OptionsError, match=next(iter(bad))):
        LoadOptions(**bad)


def test_unknown_key() -> None:
    with pytest.raises(OptionsError, match="unknown option 'wokers'"):
        from_mapping({"wokers": 2})


def test_spec_round_trip() -> None:
    strategy, options = parse_spec(
        "sequential workers=4 chunk=16MiB fadvise=sequential verify=true"
    )
    assert strategy == "sequential"
    assert options == LoadOptions(workers=4, chunk=16 << 20, fadvise="sequential", verify=True)
    assert parse_spec(format_spec(strategy, options)) == (strategy, options)


@pytest.mark.parametrize(
    ("text", "size"),
    [("4096", 4096), ("8MiB", 8 << 20), ("512k", 512 << 10), ("1G", 1 << 30), ("1.5MiB", 3 << 19)],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_bad_spec() -> None:
    for spec in ("", "sequential workers", "sequential workers=x", "sequential chunk=lots"):
        with pytest.raises(OptionsError):
            parse_spec(spec)


@pytest.mark.parametrize(
    ("text", "kib"),
    [("4096", 4096), (" 128 ", 128), ("4MiB", 4096), ("128KiB", 128), ("0", 0), ("none", None)],
)
def test_readahead_values(text: str, kib: int | None) -> None:
    assert parse_readahead(text) == kib
    if kib is not None:
        assert parse_spec(f"sequential readahead={text.strip()}")[1].readahead == kib


@pytest.mark.parametrize("text", ["1e3", "²", "٣", "-1", "1.5", "1000B", "2GiB", "9" * 30])
def test_readahead_refusals_say_the_allowed_range(text: str) -> None:
    """ASCII digits only ('٣' is no 3), one message with the range, from either syntax."""
    for parse in (parse_readahead, lambda t: parse_spec(f"sequential readahead={t}")):
        with pytest.raises(OptionsError, match=r"readahead must be whole KiB from 0 to 1048576"):
            parse(text)


@pytest.mark.parametrize("text", ["٣", "²", "0", "257", "1.0", "-2", "1e1"])
def test_worker_counts_are_ascii_digits_in_range(text: str) -> None:
    with pytest.raises(OptionsError, match=r"workers must be a whole number from 1 to 256"):
        parse_spec(f"sequential workers={text}")
