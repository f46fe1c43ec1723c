"""``modelmon inspect s3://...`` end to end, against ``rclone serve s3`` on loopback: the header
by ranged GETs, each object's size, ETag and last-modified, the endpoint, region and storage
kind; every bad input one line and its exit code."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from ...object_store import BUCKET, SECRET_KEY

STORAGE_FAILED, USAGE, BAD_MODEL = 8, 2, 3


def test_inspect_an_object_as_text(modelmon, rclone_s3: SimpleNamespace) -> None:
    done = modelmon("inspect", f"s3://{BUCKET}/gguf/tiny-Q8_0.gguf")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"model     s3://{BUCKET}/gguf/tiny-Q8_0.gguf"
    assert lines[1].startswith("format    gguf, 1 file(s)")
    (line,) = [line for line in lines if line.startswith("object ")]
    assert re.fullmatch(
        rf'object    s3://{BUCKET}/gguf/tiny-Q8_0\.gguf  [\d.]+ kB, ETag "[0-9a-f]{{32}}", '
        r"last modified \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
        line,
    ), line
    (storage,) = [line for line in lines if line.startswith("storage ")]
    endpoint = rclone_s3.env["AWS_ENDPOINT_URL"]
    assert storage == (
        f"storage   s3 at {endpoint} (minio-or-local), region us-east-1, credentials: env; "
        f"ranged GETs answered 200 with Content-Range (not 206)  [s3://{BUCKET}]"
    )


def test_inspect_a_prefix_as_json(modelmon, rclone_s3: SimpleNamespace) -> None:
    done = modelmon("inspect", f"s3://{BUCKET}/sharded/", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["path"] == f"s3://{BUCKET}/sharded/model.safetensors.index.json"
    assert data["format"] == "safetensors" and len(data["files"]) == 3
    for file in data["files"]:
        local = rclone_s3.root / file["path"].removeprefix("s3://")
        facts = file["object"]
        assert facts["url"] == file["path"] and facts["size"] == local.stat().st_size
        assert facts["etag"].startswith('"') and facts["last_modified"].endswith("Z")
        assert facts["storage"] == "s3" and facts["region"] == "us-east-1"
    (storage,) = data["storage"]
    assert storage["endpoint"] == rclone_s3.env["AWS_ENDPOINT_URL"]
    assert storage["host_kind"] == "minio-or-local" and storage["path"] == f"s3://{BUCKET}"
    assert data["memory"]["usable"] > 0


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (
            (f"s3://{BUCKET}/single/missing.safetensors",),
            STORAGE_FAILED,
            r"no such object at http://127\.0\.0\.1:\d+ \(404 NoSuchKey\)",
        ),
        (
            ("s3://no-bucket/x.gguf",),
            STORAGE_FAILED,
            r"no bucket 'no-bucket' at http://127\.0\.0\.1:\d+ \(404 NoSuchBucket\)",
        ),
        ((f"s3://{BUCKET}/lying/model.safetensors",), BAD_MODEL, "truncated: its header needs"),
        (
            (f"s3://key:{SECRET_KEY}@{BUCKET}/x.gguf",),
            USAGE,
            "a URL with credentials in it is refused",
        ),
        (("gs://bucket/model.gguf",), USAGE, "S3 interoperability"),
    ],
)
def test_bad_input_is_one_line_and_its_exit_code(
    modelmon, rclone_s3: SimpleNamespace, args: tuple[str, ...], code: int, says: str
) -> None:
    done = modelmon("inspect", *args)
    assert done.returncode == code, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("modelmon: ") and re.search(says, line), line
    assert SECRET_KEY not in line


def test_wrong_credentials(modelmon, rclone_s3: SimpleNamespace, monkeypatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    done = modelmon("inspect", f"s3://{BUCKET}/single/")
    assert done.returncode == STORAGE_FAILED
    (line,) = done.stderr.splitlines()
    assert "403 SignatureDoesNotMatch" in line and "not-the-secret" not in line


def test_recommend_on_a_bucket_answers_and_its_config_loads_the_bucket(
    modelmon, rclone_s3: SimpleNamespace, tmp_path
) -> None:
    config = tmp_path / "bucket.toml"
    url = f"s3://{BUCKET}/large/"
    done = modelmon("recommend", url, "--budget", "10", "-o", str(config))
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    # modelmon's ranged GETs, Run:ai's S3 streamer where it was raced and won, or a plain
    # download where neither was clearly faster (on loopback the server shares the 2 cores):
    # the answer says which, and the config file holds modelmon's best either way.
    answers = ("Load with modelmon, ranged", "Load with Run:ai", "Load with a plain download")
    assert first.startswith(answers), first
    if first.startswith(("Load with modelmon", "Load with a plain download")):
        # modelmon's line with the config, or a plain download's own line: either pastes
        # into a fresh Python and loads every tensor from the bucket.
        paste = next(x for x in done.stdout.splitlines() if x.startswith("Paste ("))
        tool, line = paste.removeprefix("Paste (").split("): ", 1)
        assert tool == ("modelmon" if "modelmon," in first else "plain-download"), paste
        own = f"import modelmon.core; tensors = modelmon.core.load('{url}model.safetensors'"
        assert line.startswith(own), line
        ran = subprocess.run(
            [sys.executable, "-c", f"{line}; print(len(tensors))"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert ran.returncode == 0 and int(ran.stdout) > 0, ran.stderr
    assert "Measured on this bucket by plain GETs" in done.stdout
    assert SECRET_KEY not in done.stdout + done.stderr + config.read_text()
    loaded = modelmon("load", url, "--config", str(config))
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stderr == ""  # the config was measured on this very bucket: no mismatch


def test_load_of_a_bucket_verifies_as_its_file_and_says_what_its_requests_did(
    modelmon, rclone_s3: SimpleNamespace
) -> None:
    done = modelmon("load", f"s3://{BUCKET}/sharded/", "--verify", "--json", "--threads", "2")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    local = modelmon("load", str(rclone_s3.root / BUCKET / "sharded"), "--verify", "--json")
    assert data["checksum"] is not None
    assert data["checksum"] == json.loads(local.stdout)["checksum"]
    assert data["strategy"] == "ranged"  # the default for a bucket
    reads = data["object_reads"]
    assert reads["requests"] >= 3 and reads["retries"] == 0 and reads["bytes_per_second"] > 0
    assert len(reads["connections"]) == 2 and reads["ttfb_median_s"] > 0
    assert [o["etag"] for o in data["objects"]] != [None] * 3
    assert SECRET_KEY not in done.stdout + done.stderr
    text = modelmon("load", f"s3://{BUCKET}/sharded/")
    assert text.returncode == 0, text.stderr
    assert re.search(r"^requests  \d+ GETs over \d connections, first byte", text.stdout, re.M)
    assert "nothing is cached on this machine" in text.stdout


def test_a_file_strategy_on_a_bucket_is_refused_in_one_line(
    modelmon, rclone_s3: SimpleNamespace
) -> None:
    done = modelmon("load", f"s3://{BUCKET}/single/", "--strategy", "mmap")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert "use ranged or ranged-stream" in line


def test_a_load_with_wrong_credentials_fails_in_one_line(
    modelmon, rclone_s3: SimpleNamespace, monkeypatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    done = modelmon("load", f"s3://{BUCKET}/single/")
    assert done.returncode == STORAGE_FAILED
    (line,) = done.stderr.splitlines()
    assert "403" in line and "not-the-secret" not in line
