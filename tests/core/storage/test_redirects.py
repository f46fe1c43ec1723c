"""An endpoint that redirects (301, 307) is told in one line that names it, and is never
followed: whatever the request (a ranged GET, a HEAD, a listing), it is sent once, and
nothing reaches the host the answer points to. An anonymous request that is refused says
that no credentials were found, and where they were looked for."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from modelmon.core import open_model
from modelmon.core.errors import StorageAccessError, StorageError

from ...modelmon.cli.conftest import run
from ...object_store import BUCKET

STORAGE_FAILED = 8
# The request each kind of redirect answers, and a model whose opening makes it.
OPENED_BY = {
    "GET": f"s3://{BUCKET}/single/model.safetensors",
    "HEAD": f"s3://{BUCKET}/empty/empty.safetensors",  # no range fits: a HEAD tells its size
    "LIST": f"s3://{BUCKET}/single/",
}


@pytest.fixture
def elsewhere() -> Iterator[SimpleNamespace]:
    """Another host (loopback's 127.0.0.2) listening where redirects point: ``reached()``
    says whether anything connected to it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.2", 0))
        listener.listen()
        listener.setblocking(False)

        def reached() -> bool:
            try:
                connection, _ = listener.accept()
            except BlockingIOError:
                return False
            connection.close()
            return True

        port = listener.getsockname()[1]
        yield SimpleNamespace(
            origin=f"http://127.0.0.2:{port}", host=f"127.0.0.2:{port}", reached=reached
        )


def _redirected(faulty_s3: SimpleNamespace) -> int:
    return sum(seen.fault == "redirect" for seen in faulty_s3.proxy.seen)


@pytest.mark.parametrize("what", ["GET", "HEAD", "LIST"])
def test_a_307_is_told_and_not_followed(
    faulty_s3: SimpleNamespace, elsewhere: SimpleNamespace, what: str
) -> None:
    faults = faulty_s3.proxy.faults
    faults.redirect_status, faults.redirect_what, faults.redirect_to = 307, what, elsewhere.origin
    with pytest.raises(StorageError) as caught:
        open_model(OPENED_BY[what])
    line = str(caught.value)
    assert type(caught.value) is StorageError
    assert (
        f"the endpoint {faulty_s3.proxy.endpoint} redirects this bucket to {elsewhere.host} "
        "(307" in line
    ), line
    assert "which modelmon does not follow" in line
    assert _redirected(faulty_s3) == 1 and not elsewhere.reached()


def test_inspect_of_a_redirecting_bucket_is_one_line(
    faulty_s3: SimpleNamespace, elsewhere: SimpleNamespace
) -> None:
    faults = faulty_s3.proxy.faults
    faults.redirect_status, faults.redirect_to = 307, elsewhere.origin
    done = run("inspect", f"s3://{BUCKET}/sharded/")
    assert done.returncode == STORAGE_FAILED, done.stderr
    (line,) = done.stderr.splitlines()
    assert "redirects this bucket to" in line and "which modelmon does not follow" in line
    assert _redirected(faulty_s3) == 1 and not elsewhere.reached()


def test_the_ranged_gets_of_a_load_are_not_followed(
    faulty_s3: SimpleNamespace, elsewhere: SimpleNamespace
) -> None:
    faults = faulty_s3.proxy.faults
    faults.redirect_status, faults.redirect_what, faults.redirect_to = 307, "GET", elsewhere.origin
    faults.redirect_skip = 1  # the opening's GET of the header: the load's GETs are redirected
    done = run("load", f"s3://{BUCKET}/single/", "--workers", "1", "--threads", "2")
    # A worker's storage failure is the storage's: exit 8, its one line, no class name.
    assert done.returncode == STORAGE_FAILED, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"modelmon: s3://{BUCKET}/single/model.safetensors: "), line
    assert "Error" not in line, line
    assert "redirects this bucket to" in line and "which modelmon does not follow" in line
    assert 1 <= _redirected(faulty_s3) <= 2  # one GET per connection at most, none again
    assert not elsewhere.reached()


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-3"])
def test_a_301_names_the_endpoint_and_the_region_it_says(
    faulty_s3: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, region: str
) -> None:
    monkeypatch.setenv("AWS_REGION", region)
    faults = faulty_s3.proxy.faults
    faults.redirect_status, faults.redirect_region = 301, "eu-west-3"
    with pytest.raises(StorageError) as caught:
        open_model(OPENED_BY["GET"])
    line = str(caught.value)
    assert f"the endpoint {faulty_s3.proxy.endpoint} redirects this bucket (301" in line
    if region == "eu-west-3":  # the region already set is not asked for again
        assert "set AWS_REGION" not in line
        assert "the region it names, eu-west-3, is the one requests are signed for" in line
    else:
        says = "the bucket is in eu-west-3, not us-east-1 (AWS_REGION): set AWS_REGION=eu-west-3"
        assert says in line, line
    assert _redirected(faulty_s3) == 1


def test_an_anonymous_request_refused_says_no_credentials_were_found(
    rclone_s3: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(StorageAccessError) as caught:
        open_model(OPENED_BY["GET"])
    line = str(caught.value)
    assert re.search(r"refused the request \(400 \w+\), which was anonymous", line), line
    files = f"{rclone_s3.env['AWS_SHARED_CREDENTIALS_FILE']} and {rclone_s3.env['AWS_CONFIG_FILE']}"
    assert "no credentials were found (looked in AWS_ACCESS_KEY_ID" in line and files in line
    assert "give them in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in line
