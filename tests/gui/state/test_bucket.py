"""The start page's bucket listing as state: models grouped by folder, the prefix parsed and
kept, a stale listing dropped, failures one line. Qt-free."""

from __future__ import annotations

import threading

import pytest

from modelmon.core.errors import StorageError
from modelmon.core.options import LoadOptions
from modelmon.gui.state.bucket import BucketState, Listing, bucket_prefix, bucket_rows
from modelmon.gui.state.bucket_access import (
    Access,
    BucketAccess,
    aws_profiles,
    check_endpoint,
    check_profile,
)
from modelmon.gui.state.configs import Configs
from modelmon.gui.state.events import CallQueue
from modelmon.gui.state.load_config import full_spec_text

from ..conftest import pump

LISTED = [
    Listing("llama/model.safetensors", 100),
    Listing("sharded/model-00001-of-00002.safetensors", 10),
    Listing("sharded/model-00002-of-00002.safetensors", 20),
    Listing("sharded/model.safetensors.index.json", 1),
    Listing("quant/a-Q4.gguf", 7),
    Listing("quant/b-Q8.gguf", 9),
    Listing("quant/README.md", 3),
    Listing("notes.txt", 2),
]


def test_models_are_grouped_by_folder_as_open_model_opens_them():
    rows = {row.reference: row for row in bucket_rows("s3://b/m/", LISTED)}
    assert sorted(rows) == [
        "s3://b/m/llama/",
        "s3://b/m/quant/a-Q4.gguf",
        "s3://b/m/quant/b-Q8.gguf",
        "s3://b/m/sharded/",
    ]
    sharded = rows["s3://b/m/sharded/"]
    assert (sharded.name, sharded.format, sharded.files, sharded.bytes) == (
        "sharded",
        "safetensors",
        2,
        30,
    )
    assert rows["s3://b/m/quant/b-Q8.gguf"].name == "b-Q8.gguf"
    assert rows["s3://b/m/llama/"].where == "bucket · s3://b/m/"


def test_a_prefix_is_parsed_and_one_with_credentials_is_refused_unrepeated():
    assert bucket_prefix(" s3://b/models ") == "s3://b/models/"
    assert bucket_prefix("s3://b") == "s3://b/"
    with pytest.raises(Exception, match="credentials in it is refused") as refused:
        bucket_prefix("s3://AKIAX:hunter2-secret@b/models/")
    assert "hunter2" not in str(refused.value)
    with pytest.raises(Exception, match="only an s3:// prefix"):
        bucket_prefix("https://host/models/x.gguf")


def test_the_listing_runs_off_the_thread_and_only_the_newest_prefix_counts():
    queue = CallQueue()
    kept: list[str] = []
    release = threading.Event()
    asked: list[str] = []

    def lister(prefix: str) -> list[Listing]:
        asked.append(prefix)
        if prefix == "s3://b/old/":
            release.wait(10)
        return [Listing("x/model.safetensors", 5)]

    state = BucketState(queue, kept.append, lister)
    assert state.set_prefix("s3://b/old")
    assert state.listing and state.rows == []
    assert state.set_prefix("s3://b/new/")
    pump(queue, lambda: state.listed == "s3://b/new/")
    release.set()
    state.shutdown()
    queue.run_pending()  # the old listing's answer: dropped
    assert [row.reference for row in state.rows] == ["s3://b/new/x/"]
    assert kept == ["s3://b/old/", "s3://b/new/"] and state.listed == "s3://b/new/"


def test_a_refused_listing_and_a_bad_prefix_are_one_line_each():
    queue = CallQueue()

    def refuse(prefix: str) -> list[Listing]:
        raise StorageError(prefix, "these credentials may not read it (403 AccessDenied)")

    state = BucketState(queue, lister=refuse)
    assert not state.set_prefix("gs://b/")
    assert state.error is not None and "\n" not in state.error and state.prefix is None
    assert state.set_prefix("s3://b/")
    pump(queue, lambda: state.listed is not None)
    assert state.error == "s3://b/: these credentials may not read it (403 AccessDenied)"
    assert state.rows == []


def test_a_bucket_model_has_its_own_pair_and_refuses_a_file_strategy():
    configs = Configs()
    changed: list[str] = []
    configs.changed.connect(changed.append)
    configs.set("A", "pread", LoadOptions(threads=2))
    configs.set_limits(False, "no readahead", objects=True)
    assert changed == ["A", "A", "B"]
    assert configs.strategies() == ("ranged", "ranged-stream")
    assert configs.strategy("A") == "ranged" and configs.effective("B").threads == 1
    configs.set("A", "sequential", LoadOptions())  # a file's strategy: not for a bucket
    assert configs.strategy("A") == "ranged"
    configs.set("A", "ranged-stream", LoadOptions(threads=8))
    configs.set_limits(False, None, objects=False)
    assert configs.configs["A"] == ("pread", LoadOptions(threads=2))
    assert configs.pairs[True]["A"] == ("ranged-stream", LoadOptions(threads=8))
    # A bucket's configuration names no cache state: nothing of it is cached here.
    assert full_spec_text("ranged", LoadOptions(cache="cold")).startswith("ranged workers=1")
    assert "cache" not in full_spec_text("ranged", LoadOptions(cache="cold"))


SECRET = "wJalrXUtnFEMI-never-shown-3c1"


def test_an_endpoint_is_a_server_and_never_holds_a_credential():
    assert check_endpoint("") == ("", None)
    assert check_endpoint(" http://127.0.0.1:9000/ ") == ("http://127.0.0.1:9000", None)
    for refused in (f"http://ada:{SECRET}@127.0.0.1:9000", f"https://h/?X-Amz-Signature={SECRET}"):
        endpoint, why = check_endpoint(refused)
        assert endpoint is None and why is not None and SECRET not in why, why
    assert check_endpoint("s3://bucket")[0] is None  # a bucket is not a server
    assert check_profile(" minio ") == ("minio", None)
    assert check_profile("a b")[0] is None and check_profile("")[0] == ""


def test_profiles_are_the_section_names_of_the_aws_files(tmp_path):
    (tmp_path / "config").write_text("[default]\nregion = x\n[profile minio]\nregion = y\n")
    (tmp_path / "credentials").write_text(f"[walk]\naws_secret_access_key = {SECRET}\n")
    environ = {
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
    }
    assert aws_profiles(environ) == ["default", "minio", "walk"]


def test_an_access_goes_into_the_environment_and_back_out():
    environ = {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": SECRET, "OTHER": "x"}
    before = dict(environ)
    access = BucketAccess(environ)
    access.apply(Access("http://127.0.0.1:9000", "walk"))
    # The profile applies: the environment's own keys, which botocore takes first, set aside.
    assert environ == {
        "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9000",
        "AWS_PROFILE": "walk",
        "OTHER": "x",
    }
    access.apply(Access("http://10.0.0.1:9000"))  # another: the first one's gone with it
    assert environ == {**before, "AWS_ENDPOINT_URL_S3": "http://10.0.0.1:9000"}
    environ["AWS_ENDPOINT_URL_S3"] = "set by someone else"
    access.restore()  # what it no longer holds is not its to put back
    assert environ == {**before, "AWS_ENDPOINT_URL_S3": "set by someone else"}
    assert access.current == Access()


def test_an_access_on_trial_is_kept_only_by_the_model_it_opened():
    environ = {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": SECRET}
    access = BucketAccess(environ)
    access.apply(Access("http://127.0.0.1:9158"))
    opened = dict(environ)
    access.try_access(Access("http://127.0.0.1:9185", "nosuchprofile"), "s3://b/m/")
    said = access.failure_words("s3://b: AWS profile 'x' is nowhere (AWS_PROFILE names it)")
    assert said == "s3://b: AWS profile 'x' is nowhere (File ▸ Open URL… names it)"
    assert access.settle(None) is None  # it failed: the open model's access is back
    assert environ == opened and access.current == Access("http://127.0.0.1:9158")
    access.try_access(Access("http://127.0.0.1:9185"), "s3://b/m/")
    assert access.settle("/home/me/other.gguf") is None  # another model opened instead
    assert environ == opened
    tried = Access("http://127.0.0.1:9000", "walk")
    access.try_access(tried, "s3://b/m/")
    assert access.settle("s3://b/m/") == tried  # it opened its model: kept
    assert environ == {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9000", "AWS_PROFILE": "walk"}
    assert access.failure_words("(AWS_PROFILE names it)") == "(AWS_PROFILE names it)"
