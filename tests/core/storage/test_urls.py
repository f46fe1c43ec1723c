"""Object URLs: what parses, what is refused in one line, and that a refusal never repeats
the credentials it refused."""

from __future__ import annotations

import pytest

from modelmon.core.errors import ObjectURLError
from modelmon.core.storage import is_object_url, parse_object_url
from modelmon.core.storage.facts import host_kind

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz"


@pytest.mark.parametrize(
    ("text", "scheme", "host", "key", "prefix"),
    [
        ("s3://models/llama/model.safetensors", "s3", "models", "llama/model.safetensors", False),
        ("s3://models/llama/", "s3", "models", "llama/", True),
        ("s3://models", "s3", "models", "", True),
        ("S3://models/a b#c?d@e.gguf", "s3", "models", "a b#c?d@e.gguf", False),
        ("https://host:8443/x/m.gguf", "https", "host:8443", "x/m.gguf", False),
        (
            "http://127.0.0.1:9000/b/m.safetensors",
            "http",
            "127.0.0.1:9000",
            "b/m.safetensors",
            False,
        ),
        ("https://[::1]:8080/m.gguf", "https", "[::1]:8080", "m.gguf", False),
    ],
)
def test_urls_parse_and_round_trip(
    text: str, scheme: str, host: str, key: str, prefix: bool
) -> None:
    url = parse_object_url(text)
    assert (url.scheme, url.host, url.key, url.is_prefix) == (scheme, host, key, prefix)
    assert parse_object_url(url.text) == url
    assert is_object_url(text)


def test_siblings_children_and_prefixes() -> None:
    index = parse_object_url("s3://b/m/model.safetensors.index.json")
    assert index.sibling("model-00001.safetensors").text == "s3://b/m/model-00001.safetensors"
    assert parse_object_url("s3://b/m").as_prefix().child("x.gguf").text == "s3://b/m/x.gguf"
    assert parse_object_url("https://h/a%20b/c.gguf?v=2").http_path == "/a%20b/c.gguf?v=2"


@pytest.mark.parametrize(
    "text",
    [
        f"s3://AKIAEXAMPLE:{SECRET}@models/model.safetensors",
        f"s3://AKIAEXAMPLE:{SECRET.replace('/', '')}@models/model.safetensors",
        f"https://user:{SECRET}@host/model.gguf",
        f"https://host/model.gguf?X-Amz-Credential=AKIA&X-Amz-Signature={SECRET}",
        f"https://host/model.gguf?token={SECRET}",
        f"https://host/model.gguf?sig={SECRET}",
        # A password holding "#", "?" or "/" would cut the user part short: any "@" is refused.
        f"https://user:12#{SECRET}@host/model.gguf",
        f"https://user:12?{SECRET}@host/model.gguf",
        f"https://user:12/{SECRET}@host/model.gguf",
    ],
)
def test_a_url_with_credentials_is_refused_without_repeating_them(text: str) -> None:
    with pytest.raises(ObjectURLError) as caught:
        parse_object_url(text)
    line = str(caught.value)
    assert "credentials" in line and "\n" not in line
    assert SECRET not in line and "wJalr" not in line and "AKIA" not in line


def test_text_that_is_no_url_is_repeated_redacted() -> None:
    with pytest.raises(ObjectURLError) as caught:
        parse_object_url(f"AKIAEXAMPLE:{SECRET}@models/model.safetensors")
    assert (
        str(caught.value) == "REDACTED@models/model.safetensors: not a URL (write s3://BUCKET/KEY)"
    )


def test_any_other_query_is_sent_whole_and_written_redacted() -> None:
    url = parse_object_url(f"https://host/m.safetensors?auth={SECRET}&download=true#{SECRET}")
    assert url.http_path == f"/m.safetensors?auth={SECRET}&download=true"
    assert url.request_text == f"https://host/m.safetensors?auth={SECRET}&download=true"
    assert url.text == str(url) == "https://host/m.safetensors?auth=REDACTED&download=true"
    assert SECRET not in repr(url)
    assert parse_object_url(url.request_text) == url


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("gs://bucket/model.gguf", "S3 interoperability"),
        ("az://container/model.gguf", "s3://, https:// and http://"),
        ("s3:///model.gguf", "no bucket"),
        ("https://host/models/", "names one file"),
        ("https://host", "names one file"),
    ],
)
def test_other_urls_are_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(ObjectURLError, match=says):
        parse_object_url(text)


def test_a_scheme_typo_repeats_the_url_typed_without_its_secret() -> None:
    with pytest.raises(ObjectURLError) as caught:
        parse_object_url(f"s4://user:{SECRET}@host/models/lab/")
    said = str(caught.value)
    assert said.startswith("s4://") and "host/models/lab/" in said, said
    assert SECRET not in said and "not a scheme modelmon reads" in said


def test_paths_are_not_object_urls() -> None:
    for text in ("model.safetensors", "/models/s3:/x", "hf:org/name", "ollama:llama3"):
        assert not is_object_url(text)


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("s3.us-east-1.amazonaws.com", "aws"),
        ("bucket.s3.amazonaws.com", "aws"),
        ("storage.googleapis.com", "gcs-interop"),
        ("abc123.r2.cloudflarestorage.com", "r2"),
        ("127.0.0.1", "minio-or-local"),
        ("[::1]", "minio-or-local"),
        ("10.1.2.3", "minio-or-local"),
        ("minio", "minio-or-local"),
        ("localhost", "minio-or-local"),
        ("s3.example.com", "other"),
        ("8.8.8.8", "other"),
    ],
)
def test_host_kinds(host: str, kind: str) -> None:
    assert host_kind(host) == kind
