"""How a rate is written: one function, MB/s as storage is sold, kB/s under 1 MB/s."""

from __future__ import annotations

import json

import pytest

from modelmon.core import LoadResult
from modelmon.core.output import dumps, rate_text, render_result
from modelmon.core.system import cache_not_measured


@pytest.mark.parametrize(
    ("mbps", "text"),
    [
        (1320.4, "1320 MB/s"),
        (10.0, "10 MB/s"),
        (4.24, "4.2 MB/s"),
        (1.0, "1.0 MB/s"),
        (0.9996, "1.0 MB/s"),
        (0.9994, "999 kB/s"),
        (0.085, "85 kB/s"),
        (0.01, "10 kB/s"),
        (0.0096, "9.6 kB/s"),
        (0.0, "0 kB/s"),
    ],
)
def test_a_rate_under_one_megabyte_a_second_is_written_in_kilobytes(mbps: float, text: str) -> None:
    assert rate_text(mbps) == text


def test_thousands_are_grouped_where_asked() -> None:
    assert rate_text(1320.4, grouped=True) == "1,320 MB/s"
    assert rate_text(0.5, grouped=True) == "500 kB/s"


def test_a_slow_load_reads_in_kilobytes_and_its_json_keeps_the_number() -> None:
    result = LoadResult(
        status="ok",
        strategy="ranged",
        options={},
        model="s3://b/m.safetensors",
        format="safetensors",
        files=("s3://b/m.safetensors",),
        bytes=100_000,
        seconds=10.0,
        cache=cache_not_measured("cold"),
    )
    assert "100.00 kB in 10.000 s = 10 kB/s" in render_result(result)
    document = json.loads(dumps(result.to_dict()))
    assert document["mbps"] == 0.01 and isinstance(document["mbps"], float)


def test_a_span_of_rates_says_its_unit_once() -> None:
    from modelmon.core.units import rate_span_text

    assert rate_span_text(576.2, 707.4) == "576–707 MB/s"
    assert rate_span_text(0.012, 0.015) == "12–15 kB/s"
    assert rate_span_text(0.85, 1.2) == "850 kB/s–1.2 MB/s"


@pytest.mark.parametrize(
    ("mbps", "kept"),
    [(1320.44, 1320.4), (1.04, 1.0), (0.9812, 0.981), (0.00982, 0.00982), (0.0, 0.0)],
)
def test_a_rate_is_kept_in_megabytes_to_three_digits_under_one(mbps: float, kept: float) -> None:
    from modelmon.core.units import rate_figure

    assert rate_figure(mbps) == kept


@pytest.mark.parametrize("mbps", [361.46, 361.54, 9.949, 0.99949, 0.0099949, 1249.96])
def test_a_rate_reads_the_same_from_its_raw_value_and_from_its_record(mbps: float) -> None:
    """A rate is said from the raw value in one place and from the record's figure in
    another (the explanation, the config file's tables): the words are the same."""
    from modelmon.core.units import rate_figure

    assert rate_text(mbps) == rate_text(rate_figure(mbps))
