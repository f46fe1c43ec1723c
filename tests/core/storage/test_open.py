"""open_model of s3:// and http(s):// URLs: the same model as the file's, read by ranged GETs
of the headers only, and every bad input one clear line of its own kind."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import open_model
from modelmon.core.errors import (
    EndpointUnreachableError,
    ModelFormatError,
    ObjectNotFoundError,
    RangesIgnoredError,
    StorageAccessError,
)
from modelmon.core.model.kind import CONFIG_BYTES, checkpoint_kind

from ...object_store import BUCKET, SECRET_KEY


@pytest.fixture(params=["rclone", "moto"])
def s3(
    request: pytest.FixtureRequest, rclone_server: object, moto_server: object
) -> SimpleNamespace:
    """Each test against rclone serve s3 (200 + Content-Range) and moto (206); both servers
    named so they start before the test's leak check looks."""
    return request.getfixturevalue(f"{request.param}_s3")  # type: ignore[no-any-return]


def _tensors(model: object) -> list[tuple[str, str, int, int, str, tuple[int, ...]]]:
    return [
        (e.name, e.file.rpartition("/")[2], e.offset, e.length, e.dtype, e.shape)
        for e in model.extents  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("s3://models/single/model.safetensors", "single/model.safetensors"),
        ("s3://models/single/", "single/model.safetensors"),
        (
            "s3://models/sharded/model.safetensors.index.json",
            "sharded/model.safetensors.index.json",
        ),
        ("s3://models/sharded/", "sharded"),
        ("s3://models/sharded", "sharded"),
        ("s3://models/gguf/tiny-Q8_0.gguf", "gguf/tiny-Q8_0.gguf"),
        ("s3://models/large-gguf", "large-gguf/large.gguf"),
    ],
)
def test_an_object_opens_as_its_file_does(s3: SimpleNamespace, url: str, local: str) -> None:
    model = open_model(url)
    from_disk = open_model(s3.root / BUCKET / local)
    assert model.format == from_disk.format
    assert _tensors(model) == _tensors(from_disk)
    assert model.metadata == from_disk.metadata
    for file, disk_file in zip(model.files, from_disk.files, strict=True):
        assert file.path.startswith("s3://models/") and file.size == disk_file.size
        facts = file.remote
        assert facts is not None and facts.url == file.path and facts.size == file.size
        assert facts.etag and facts.last_modified and facts.storage == "s3"
        assert facts.endpoint == s3.env["AWS_ENDPOINT_URL"] and facts.region == "us-east-1"
        assert facts.host_kind == "minio-or-local" and facts.credentials == "env"
        assert facts.ranges == (
            "206" if s3.server.__class__.__name__ == "MotoS3" else "200 with Content-Range"
        )


@pytest.mark.parametrize(
    ("url", "folder", "kind"),
    [
        # A prefix is what its objects say, as its folder is by its files.
        ("s3://models/llama/", "llama", "transformers"),  # config.json naming an architecture
        ("s3://models/llama", "llama", "transformers"),
        ("s3://models/single/", "single", "weights"),  # the weights alone
        ("s3://models/sharded/", "sharded", "weights"),
        ("s3://models/gguf/", "gguf", "gguf"),
        # An object named alone has nothing listed beside it: its weights.
        ("s3://models/llama/model.safetensors", None, "weights"),
    ],
)
def test_a_prefix_is_of_the_kind_its_objects_say(
    s3: SimpleNamespace, url: str, folder: str | None, kind: str
) -> None:
    assert checkpoint_kind(open_model(url)) == kind
    if folder is not None:
        assert checkpoint_kind(open_model(s3.root / BUCKET / folder)) == kind


LARGE_CONFIG = b'{"model_type": "llama", "pad": "' + b"x" * CONFIG_BYTES + b'"}'


@pytest.mark.parametrize(
    ("name", "beside", "kind"),
    [
        ("named", {"config.json": b'{"model_type": "llama"}'}, "transformers"),
        ("unet", {"config.json": b'{"_class_name": "UNet2DConditionModel"}'}, "diffusers"),
        ("pipeline", {"model_index.json": b'{"_class_name": "SDPipeline"}'}, "diffusers"),
        ("unnamed", {"config.json": b'{"hidden_size": 64}'}, "weights"),  # no architecture
        ("not-json", {"config.json": b"not json"}, "weights"),
        ("a-list", {"config.json": b"[1, 2]"}, "weights"),
        # Larger than a config.json is: not read, as a folder's is not.
        ("large-config", {"config.json": LARGE_CONFIG}, "weights"),
    ],
)
def test_a_prefix_and_a_folder_of_the_same_files_are_of_one_kind(
    moto_s3: SimpleNamespace, tmp_path: Path, name: str, beside: dict[str, bytes], kind: str
) -> None:
    """The rule a folder's files are judged by judges a prefix's objects (``kind_of``)."""
    weights = (moto_s3.root / BUCKET / "single" / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(weights)
    moto_s3.server.put(BUCKET, f"kinds/{name}/model.safetensors", weights)
    for file, data in beside.items():
        (tmp_path / file).write_bytes(data)
        moto_s3.server.put(BUCKET, f"kinds/{name}/{file}", data)
    assert checkpoint_kind(open_model(tmp_path)) == kind
    assert checkpoint_kind(open_model(f"s3://{BUCKET}/kinds/{name}/")) == kind


@pytest.mark.parametrize("prefix", ["large/", "large-gguf/"])
def test_a_header_is_read_by_ranged_gets_never_the_whole_object(
    faulty_s3: SimpleNamespace, prefix: str
) -> None:
    model = open_model(f"s3://{BUCKET}/{prefix}")
    (file,) = model.files
    gets = [
        seen
        for seen in faulty_s3.proxy.seen
        if seen.method == "GET" and "list-type=" not in seen.path
    ]
    assert gets and all(seen.range for seen in gets)
    asked = 0
    for seen in gets:
        first, _, last = seen.range.removeprefix("bytes=").partition("-")
        asked += min(int(last), file.size - 1) - int(first) + 1
    assert asked < file.size / 2, (asked, file.size)


@pytest.mark.parametrize("prefix", ["sharded/", "gguf/"])
def test_a_header_longer_than_the_first_read_is_read_on(
    faulty_s3: SimpleNamespace, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Headers past the first GET: the safetensors header in a second GET, the GGUF walk's
    prefix grown GET by GET as far as it goes; the model is the file's all the same."""
    from modelmon.core.model.formats import gguf_format
    from modelmon.core.storage import objects

    monkeypatch.setattr(objects, "PROBE_BYTES", 1024)
    monkeypatch.setattr(gguf_format, "FIRST_READ", 1024)
    model = open_model(f"s3://{BUCKET}/{prefix}")
    assert _tensors(model) == _tensors(open_model(faulty_s3.root / BUCKET / prefix))
    gets = [s for s in faulty_s3.proxy.seen if s.method == "GET" and "list-type=" not in s.path]
    assert len(gets) > len(model.files) + (prefix == "sharded/")  # more than one GET a file


def test_an_empty_object_and_a_lying_header_fail_as_their_files_do(s3: SimpleNamespace) -> None:
    with pytest.raises(ModelFormatError, match=r"empty file \(0 bytes\)"):
        open_model(f"s3://{BUCKET}/empty/empty.safetensors")
    with pytest.raises(ModelFormatError) as on_disk:
        open_model(s3.root / BUCKET / "lying" / "model.safetensors")
    with pytest.raises(ModelFormatError) as remote:
        open_model(f"s3://{BUCKET}/lying/model.safetensors")
    assert remote.value.problem == on_disk.value.problem
    assert "truncated: its header needs" in remote.value.problem


def test_a_cut_gguf_fails_as_its_file_does(s3: SimpleNamespace) -> None:
    with pytest.raises(ModelFormatError) as on_disk:
        open_model(s3.root / BUCKET / "cut-gguf" / "cut.gguf")
    with pytest.raises(ModelFormatError) as remote:
        open_model(f"s3://{BUCKET}/cut-gguf/cut.gguf")
    assert (remote.value.problem, remote.value.offset) == (
        on_disk.value.problem,
        on_disk.value.offset,
    )
    assert remote.value.problem.startswith("truncated")


def test_a_shard_the_index_names_but_the_bucket_lacks(moto_s3: SimpleNamespace) -> None:
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "gone.safetensors"}}
    single = (moto_s3.root / BUCKET / "single" / "model.safetensors").read_bytes()
    moto_s3.server.put(BUCKET, "broken/model-00001-of-00002.safetensors", single)
    moto_s3.server.put(BUCKET, "broken/model.safetensors.index.json", json.dumps(index).encode())
    with pytest.raises(
        ModelFormatError,
        match=r"gone\.safetensors: shard named by model\.safetensors\.index\.json is missing",
    ):
        open_model(f"s3://{BUCKET}/broken/model.safetensors.index.json")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (
            "s3://models/single/missing.safetensors",
            r"no such object at http://127\.0\.0\.1:\d+ \(404 NoSuchKey\)",
        ),
        (
            "s3://no-such-bucket/model.safetensors",
            r"no bucket 'no-such-bucket' at http://127\.0\.0\.1:\d+ \(404 NoSuchBucket\)",
        ),
        (
            "s3://no-such-bucket/llama",  # a key or a prefix: neither gets a "/" added
            r"no bucket 'no-such-bucket' at http://127\.0\.0\.1:\d+ \(404 NoSuchBucket\)",
        ),
        ("s3://models/nothing-here/", r"no objects under this prefix at http://127\.0\.0\.1:\d+$"),
    ],
)
def test_missing_buckets_keys_and_prefixes(s3: SimpleNamespace, url: str, says: str) -> None:
    with pytest.raises(ObjectNotFoundError, match=says) as caught:
        open_model(url)
    # The URL as it was written, then what is wrong with it (no "/" added to a key).
    assert "\n" not in str(caught.value) and str(caught.value).startswith(f"{url}: ")


def test_wrong_credentials_are_refused_in_one_line(
    rclone_s3: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY + "-wrong")
    with pytest.raises(StorageAccessError) as caught:
        open_model(f"s3://{BUCKET}/single/model.safetensors")
    line = str(caught.value)
    assert "the secret key is not the one the endpoint holds for this access key" in line
    assert "403 SignatureDoesNotMatch" in line and "credentials: env" in line
    assert SECRET_KEY not in line and "\n" not in line
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "nobody")
    with pytest.raises(StorageAccessError, match="the endpoint knows no such access key"):
        open_model(f"s3://{BUCKET}/single/model.safetensors")


def test_an_endpoint_that_is_down(
    rclone_s3: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        started = time.monotonic()
        with pytest.raises(EndpointUnreachableError) as caught:
            open_model(f"s3://{BUCKET}/single/model.safetensors")
    assert f"cannot reach the endpoint http://127.0.0.1:{port} (connection refused)" in str(
        caught.value
    )
    assert "after 3 tries" in str(caught.value)
    assert time.monotonic() - started < 10


def test_a_server_that_ignores_ranges_is_refused(faulty_s3: SimpleNamespace) -> None:
    faulty_s3.proxy.faults.ignore_ranges = True
    with pytest.raises(RangesIgnoredError, match="the server ignores byte ranges"):
        open_model(f"s3://{BUCKET}/large/model.safetensors")


def test_an_http_url_of_a_server_that_honours_ranges(moto_s3: SimpleNamespace) -> None:
    base = moto_s3.server.endpoint  # moto serves path-style GETs without a signature
    model = open_model(f"{base}/{BUCKET}/sharded/model.safetensors.index.json")
    assert _tensors(model) == _tensors(open_model(moto_s3.root / BUCKET / "sharded"))
    facts = model.files[0].remote
    assert facts is not None and facts.storage == "http" and facts.region is None
    assert facts.credentials == "none: plain requests" and facts.ranges == "206"
    with pytest.raises(ObjectNotFoundError, match=r"no such file on the server \(404\)"):
        open_model(f"{base}/{BUCKET}/single/missing.gguf")


def test_files_open_as_before(tmp_path: Path) -> None:
    """A path that merely looks like a URL's tail is a path (no network code runs)."""
    folder = tmp_path / "s3:" / "models"
    folder.mkdir(parents=True)
    with pytest.raises(ModelFormatError, match="directory holds no"):
        open_model(str(folder))
