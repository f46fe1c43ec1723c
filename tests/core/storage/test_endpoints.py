"""The endpoint and region the AWS configuration names, checked before botocore sees them: a
malformed endpoint, or one holding a user part, a query or a fragment, is refused in one
line that names what set it (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3, a profile's
endpoint_url) and never repeats what may hold a secret; the CLI exits 8 for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import open_model
from modelmon.core.errors import StorageConfigError

from ...modelmon.cli.conftest import run
from ...object_store import BUCKET, aws_environment

SECRET = "eNdPoInT-sEcReT-never-written-7e1a"
STORAGE_FAILED = 8
MODEL = f"s3://{BUCKET}/single/model.safetensors"

# An endpoint as a hostile user writes it, and what the refusal says of it.
REFUSED = [
    (f"http://127.0.0.1:9/?X-Amz-Security-Token={SECRET}", "the endpoint URL holds a query"),
    (f"http://127.0.0.1:9/#{SECRET}", "the endpoint URL holds a fragment"),
    (f"http://user:{SECRET}@127.0.0.1:9", "the endpoint URL holds a user part (credentials)"),
    (f"http://user:{SECRET}/x@127.0.0.1:9", "the endpoint URL holds a user part (credentials)"),
    ("127.0.0.1:9000", "has no scheme: write it http://127.0.0.1:9000 (or https://"),
    (SECRET, "has no scheme: write it http://HOST:PORT (or https://"),
    ("http://127.0.0.1:99999", "the endpoint http://127.0.0.1:99999: its port is not one of 1"),
    (f"http://127.0.0.1:-{SECRET}", "the endpoint http://127.0.0.1: its port is not a number"),
    ("http://127.0.0.1:9557x", "the endpoint http://127.0.0.1:9557x: its port is not a number"),
    ("ftp://127.0.0.1:9000", "the endpoint URL is ftp://: an S3 endpoint is http:// or https://"),
    ("http://[::1", "the endpoint URL has no HOST[:PORT] after http://"),
    ("http://[::g]:9000", "the endpoint URL has no HOST[:PORT] after http://"),
    (f"http://127.0.0.1:9/{SECRET} x", "the endpoint URL holds a space"),
]


@pytest.fixture
def no_server(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The test credentials and config files, and no endpoint: nothing is ever asked."""
    with aws_environment("http://127.0.0.1:9", tmp_path) as env:
        yield env


def _profile(home: Path, endpoint: str) -> None:
    (home / "aws-config").write_text(f"[profile research]\nendpoint_url = {endpoint}\n")


@pytest.mark.parametrize("source", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "profile"])
@pytest.mark.parametrize(("endpoint", "says"), REFUSED)
def test_a_bad_endpoint_is_refused_naming_what_set_it(
    no_server: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    endpoint: str,
    says: str,
) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    if source == "profile":
        _profile(tmp_path, endpoint)
        monkeypatch.setenv("AWS_PROFILE", "research")
        named = f"profile research's endpoint_url in {tmp_path / 'aws-config'}: "
    else:
        monkeypatch.setenv(source, endpoint)
        named = f"{source}: "
    with pytest.raises(StorageConfigError) as caught:
        open_model(MODEL)
    line = str(caught.value)
    assert line.startswith(named) and says in line, line
    assert SECRET not in f"{line} {caught.value!r}" and "\n" not in line


@pytest.mark.parametrize(
    "endpoint",
    [
        f"http://127.0.0.1:9/?X-Amz-Security-Token={SECRET}",
        f"http://127.0.0.1:9#{SECRET}",
        "127.0.0.1:9000",
        "http://127.0.0.1:99999",
        "ftp://127.0.0.1:9000",
        "http://[::1",
    ],
)
@pytest.mark.parametrize("json", [False, True])
def test_the_cli_says_one_line_and_exits_8(
    no_server: dict[str, str], monkeypatch: pytest.MonkeyPatch, endpoint: str, json: bool
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    done = run("inspect", MODEL, *(["--json"] if json else []))
    assert done.returncode == STORAGE_FAILED, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("modelmon: AWS_ENDPOINT_URL: "), line
    assert done.stdout == "" and SECRET not in line


def test_aws_region_comes_before_aws_default_region(
    rclone_s3: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    facts = open_model(MODEL).files[0].remote
    assert facts is not None and facts.region == "eu-west-3"
    monkeypatch.delenv("AWS_REGION")
    facts = open_model(MODEL).files[0].remote
    assert facts is not None and facts.region == "us-west-2"


@pytest.mark.parametrize("name", ["AWS_REGION", "AWS_DEFAULT_REGION"])
def test_a_region_that_is_no_region_is_refused_naming_its_variable(
    no_server: dict[str, str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv(name, f"us east {SECRET}")
    done = run("inspect", MODEL)
    assert done.returncode == STORAGE_FAILED, done.stderr
    (line,) = done.stderr.splitlines()
    assert line == f"modelmon: {name}: not a region's name (letters, digits and -, as us-east-1)"
