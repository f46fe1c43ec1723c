"""What each answer of an S3 endpoint means, as one line: the codes the loopback servers
never send (expired tokens, redirects to a bucket's region...) included."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from modelmon.core.errors import (
    ObjectChangedError,
    ObjectNotFoundError,
    StorageAccessError,
    StorageError,
)
from modelmon.core.storage.connection import Transient, parse_content_range
from modelmon.core.storage.policy import RetryPolicy
from modelmon.core.storage.s3 import translate
from modelmon.core.storage.urls import parse_object_url

STORE = SimpleNamespace(
    credentials="sso",
    endpoint="https://s3.eu-west-1.amazonaws.com",
    region="eu-west-1",
    region_source="AWS_REGION",
    endpoint_source="none: AWS's",
    searched="",  # credentials were found
)
ANONYMOUS = SimpleNamespace(
    **{**vars(STORE), "credentials": "none: anonymous requests", "searched": "~/.aws/..."}
)
URL = parse_object_url("s3://bucket/model.safetensors")


def _answer(status: int, code: str, **headers: str) -> dict[str, object]:
    return {
        "Error": {"Code": code, "Message": "anything the server says"},
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers},
    }


@pytest.mark.parametrize(
    ("status", "code", "kind", "says"),
    [
        (
            403,
            "ExpiredToken",
            StorageAccessError,
            "the session token has expired (403 ExpiredToken; credentials: sso",
        ),
        (403, "AccessDenied", StorageAccessError, "these credentials may not read it"),
        (400, "AuthorizationHeaderMalformed", StorageAccessError, "set AWS_REGION"),
        (
            404,
            "NoSuchKey",
            ObjectNotFoundError,
            "no such object at https://s3.eu-west-1.amazonaws.com (404 NoSuchKey)",
        ),
        (412, "PreconditionFailed", ObjectChangedError, "replaced since it was opened"),
        (
            301,
            "PermanentRedirect",
            StorageError,
            "the endpoint https://s3.eu-west-1.amazonaws.com redirects this bucket (301 "
            "PermanentRedirect), which modelmon does not follow: it says the bucket is in "
            "us-west-2, not eu-west-1 (AWS_REGION): set AWS_REGION=us-west-2",
        ),
        (
            400,
            "InvalidArgument",
            StorageError,
            "the endpoint refused the request (400 InvalidArgument)",
        ),
    ],
)
def test_refusals(status: int, code: str, kind: type, says: str) -> None:
    error = translate(
        STORE,  # type: ignore[arg-type]
        URL,
        _answer(status, code, **{"x-amz-bucket-region": "us-west-2"}),
    )
    assert type(error) is kind and says in str(error) and "anything the server" not in str(error)


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (503, "SlowDown", "throttled"),
        (429, "TooManyRequests", "throttled"),
        (400, "RequestLimitExceeded", "throttled"),
        (500, "InternalError", "server-error"),
        (502, "502", "server-error"),
        (504, "504", "server-error"),
    ],
)
def test_answers_worth_a_retry(status: int, code: str, kind: str) -> None:
    error = translate(STORE, URL, _answer(status, code))  # type: ignore[arg-type]
    assert isinstance(error, Transient) and error.kind == kind and error.status == status


@pytest.mark.parametrize("status", [301, 307])
def test_a_redirect_naming_the_region_already_set_says_so(status: int) -> None:
    headers = {"x-amz-bucket-region": "eu-west-1", "location": "https://elsewhere:8443/b/k"}
    error = translate(STORE, URL, _answer(status, str(status), **headers))  # type: ignore[arg-type]
    line = str(error)
    assert type(error) is StorageError and "set AWS_REGION" not in line
    assert f"amazonaws.com redirects this bucket to elsewhere:8443 ({status}), " in line
    assert "the region it names, eu-west-1, is the one requests are signed for" in line


@pytest.mark.parametrize(("status", "code"), [(400, "UnsupportedAlgorithm"), (403, "AccessDenied")])
def test_a_refused_anonymous_request_says_no_credentials_were_found(status: int, code: str) -> None:
    error = translate(ANONYMOUS, URL, _answer(status, code))  # type: ignore[arg-type]
    line = str(error)
    assert type(error) is StorageAccessError
    assert f"refused the request ({status} {code}), which was anonymous" in line
    assert "no credentials were found (looked in ~/.aws/...)" in line
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in line


def test_content_ranges() -> None:
    assert parse_content_range("bytes 0-99/1000") == (0, 99, 1000)
    assert parse_content_range("bytes */1000") == (None, None, 1000)
    assert parse_content_range("bytes 0-99/*") == (0, 99, None)
    assert parse_content_range("items 0-99/1000") is None
    assert parse_content_range(None) is None


def test_backoff_is_full_jitter_under_a_cap() -> None:
    policy = RetryPolicy(base_s=0.1, cap_s=2.0)
    for failures in range(1, 40):
        ceiling = min(2.0, 0.1 * 2 ** (failures - 1))
        assert all(0 <= policy.delay(failures) <= ceiling for _ in range(50))
