"""The AWS configuration a user already has, as botocore reads it: profiles in
~/.aws/config and ~/.aws/credentials named by AWS_PROFILE, AWS_ENDPOINT_URL_S3 before
AWS_ENDPOINT_URL, the region, path-style addressing, anonymous requests."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import open_model
from modelmon.core.errors import StorageError

from ...object_store import ACCESS_KEY, BUCKET, SECRET_KEY

SINGLE = f"s3://{BUCKET}/single/model.safetensors"


def _profile(home: Path, endpoint: str) -> None:
    (home / "aws-credentials").write_text(
        f"[research]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
    )
    (home / "aws-config").write_text(
        "[profile research]\nregion = eu-west-3\n"
        f"endpoint_url = {endpoint}\ns3 =\n    addressing_style = path\n"
    )


def test_a_profile_named_by_aws_profile(
    rclone_s3: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION"):
        monkeypatch.delenv(name)
    _profile(tmp_path, rclone_s3.server.endpoint)
    monkeypatch.setenv("AWS_PROFILE", "research")
    facts = open_model(SINGLE).files[0].remote
    assert facts is not None
    assert facts.credentials == "shared-credentials-file" and facts.region == "eu-west-3"
    assert facts.endpoint == rclone_s3.server.endpoint
    monkeypatch.setenv("AWS_PROFILE", "nobody")
    with pytest.raises(StorageError, match="AWS profile 'nobody' is in neither"):
        open_model(SINGLE)


def test_the_s3_endpoint_variable_comes_first(
    rclone_s3: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed.getsockname()[1]}")
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", rclone_s3.server.endpoint)
        facts = open_model(SINGLE).files[0].remote
    assert facts is not None and facts.endpoint == rclone_s3.server.endpoint


def test_no_credentials_means_anonymous_requests(
    moto_s3: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    facts = open_model(SINGLE).files[0].remote  # moto's objects are public-read
    assert facts is not None and facts.credentials == "none: anonymous requests"


def test_every_session_of_a_process_shares_one_parse_of_botocores_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each load from a bucket opens a store and a botocore session: they share the parse of
    botocore's data files (the S3 API's model), per search path, not each its own."""
    from modelmon.core.storage.aws import S3Access

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("AWS_DATA_PATH", raising=False)

    def loader() -> object:
        return S3Access(f"s3://{BUCKET}")._session.get_component("data_loader")

    first = loader()
    assert loader() is first
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    other = loader()
    assert other is not first and loader() is other
