"""No credential is written anywhere: every output, record, log line and error text of reads
from a bucket is searched for the secret key (and for a wrong one the test tried)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from modelmon.core import open_model
from modelmon.core.errors import ModelmonError
from modelmon.core.output import dumps, model_summary, render_inspect
from modelmon.core.storage.objects import open_store
from modelmon.core.storage.reader import ObjectReader, Span, plan_parts
from modelmon.core.storage.records import RequestRecord
from modelmon.core.storage.urls import parse_object_url

from ...fault_proxy import FaultProxy
from ...modelmon.cli.conftest import run
from ...object_store import BUCKET, SECRET_KEY, MotoS3

WRONG_SECRET = "wr0ng-SeCrEt-also-never-written-41d7"


def test_no_output_record_log_or_error_holds_a_secret(
    faulty_s3: SimpleNamespace, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)  # botocore's and urllib3's debug logs too
    texts: list[str] = []
    records: list[RequestRecord] = []
    for url in (f"s3://{BUCKET}/sharded/", f"s3://{BUCKET}/large-gguf/"):
        model = open_model(url)
        summary = model_summary(model)
        texts += [repr(model.files), dumps(summary), render_inspect(summary)]
        files = [file.remote for file in model.files if file.remote is not None]
        arrays = [np.zeros(facts.size, np.uint8) for facts in files]
        spans = [Span(f, 0, f.size, memoryview(a)) for f, a in zip(files, arrays, strict=True)]
        with open_store(parse_object_url(url)) as store, ObjectReader(store, 2) as reader:
            faulty_s3.proxy.faults.throttle = 1
            faulty_s3.proxy.faults.resets, faulty_s3.proxy.faults.reset_after = 1, 1000
            stats = reader.read(plan_parts(spans, 256 << 10), on_record=records.append)
        texts += [repr(stats), repr(records)]
    errors: list[BaseException] = []
    for url in (f"s3://{BUCKET}/single/missing.gguf", "s3://no-bucket/x.gguf"):
        with pytest.raises(ModelmonError) as caught:
            open_model(url)
        errors.append(caught.value)
    with pytest.raises(ModelmonError) as caught:
        open_model(f"s3://testkey:{SECRET_KEY}@{BUCKET}/x.gguf")
    errors.append(caught.value)
    faulty_s3.proxy.faults.ignore_ranges = True
    with pytest.raises(ModelmonError) as caught:
        open_model(f"s3://{BUCKET}/large/")
    errors.append(caught.value)
    faulty_s3.proxy.faults.ignore_ranges = False
    cli = [
        run("inspect", f"s3://{BUCKET}/sharded/"),
        run("inspect", f"s3://{BUCKET}/gguf/tiny-Q8_0.gguf", "--json"),
        run("inspect", f"s3://{BUCKET}/single/missing.gguf"),
    ]
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", WRONG_SECRET)
    with pytest.raises(ModelmonError) as caught:
        open_model(f"s3://{BUCKET}/single/")
    errors.append(caught.value)
    cli.append(run("inspect", f"s3://{BUCKET}/single/", "--json"))
    texts += [f"{error}\n{error!r}" for error in errors]
    texts += [f"{done.stdout}\n{done.stderr}" for done in cli]
    texts.append(caplog.text)
    assert [done.returncode for done in cli] == [0, 0, 8, 8]
    assert len(caplog.records) > 50  # the debug logs were on, and are searched too
    for text in texts:
        assert SECRET_KEY not in text and WRONG_SECRET not in text


QUERY_SECRET = "qUeRy-sEcReT-never-written-3f8e"


@pytest.fixture
def proxied_http(moto_server: MotoS3, bucket_root: Path) -> Iterator[FaultProxy]:
    """A FaultProxy in front of moto, whose objects plain GETs read: it records the request
    targets, so a test sees that the query reached the server."""
    with FaultProxy(moto_server.port, bucket_root).start() as proxy:
        yield proxy


def test_an_https_url_query_is_sent_whole_and_written_nowhere(
    proxied_http: FaultProxy, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # urllib3 logs each request's target
    query = f"auth={QUERY_SECRET}&download=true"
    url = f"{proxied_http.endpoint}/{BUCKET}/single/model.safetensors?{query}#{QUERY_SECRET}"
    model = open_model(url)
    summary = model_summary(model)
    texts = [repr(model), repr(model.files), dumps(summary), render_inspect(summary)]
    config = tmp_path / "recommended.toml"
    cli = [
        run("inspect", url),
        run("inspect", url, "--json"),
        run("load", url, "--json", "--verify", "--workers", "2"),
        run("load", url),
        run("recommend", url, "--budget", "5", "-o", str(config)),
    ]
    assert [done.returncode for done in cli] == [0] * len(cli), [d.stderr for d in cli]
    texts += [f"{done.stdout}\n{done.stderr}" for done in cli]
    texts += [config.read_text(), caplog.text]
    assert f"{BUCKET}/single/model.safetensors?auth=REDACTED&download=true" in cli[0].stdout
    for text in texts:
        assert QUERY_SECRET not in text
    # Every request carried the query whole, the load workers' ranged GETs too; never the
    # fragment, which is no part of a request.
    gets = [seen.path for seen in proxied_http.seen if seen.method == "GET"]
    assert len(gets) > 5 and all(path.endswith(f"?{query}") for path in gets), gets
