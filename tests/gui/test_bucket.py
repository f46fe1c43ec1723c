"""A model in object storage in the app, against ``rclone serve s3`` on loopback: File ▸ Open
URL…, the start page's bucket listing, the object strategies, a load's request figures, and
every failure one line that repeats no secret."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.bucket_access import Access
from modelmon.gui.state.export_format import results_csv, results_json
from modelmon.gui.state.formatting import ab_detail_lines
from modelmon.gui.state.load_config import strategy_names
from modelmon.gui.state.results_rows import CACHE, COLUMNS, STATUS, cell_text

from ..fault_proxy import FaultProxy
from ..object_store import BUCKET, SECRET_KEY, MotoS3
from .conftest import wait_idle

SHARDED = f"s3://{BUCKET}/sharded/"


def answer_url_dialog(qtbot, window: MainWindow, text: str, accept: bool = True) -> None:
    """File ▸ Open URL…, ``text`` typed, Open pressed (then Cancel if it stays open)."""
    seen: list[str] = []

    def answer() -> None:
        dialog = window.dialog
        assert dialog is not None
        dialog.field.setEditText(text)
        dialog.accept()
        if dialog.isVisible():  # refused: what it said, then Cancel
            seen.append(dialog.error.text())
            dialog.reject()

    QTimer.singleShot(0, answer)
    window.choose_url()
    return seen[0] if seen else None


def offered(window: MainWindow, label: str) -> list[str]:
    panel = window.workspace.panels[label]
    box = panel.strategy_box
    return [
        str(choice.name)
        for row, choice in enumerate(panel.choices)
        if choice.kind == "strategy" and not box.view().isRowHidden(row)
    ]


def everything_written(settings_file: Path) -> str:
    return settings_file.read_text() if settings_file.exists() else ""


def test_open_url_loads_a_bucket_model_with_its_request_figures(
    qtbot, window: MainWindow, rclone_s3: SimpleNamespace, tmp_path: Path, small_model: Path
):
    assert answer_url_dialog(qtbot, window, SHARDED) is None
    qtbot.waitUntil(lambda: window.bench.info is not None, timeout=20_000)
    assert window.bench.info.in_bucket and window.bench.info.path == SHARDED
    panel = window.workspace.model_panel
    assert panel.values["device"].text().startswith(rclone_s3.env["AWS_ENDPOINT_URL"])
    assert panel.titles["device"].text() == "Endpoint:"
    # Only the object strategies, their knobs named as they are used; A follows the default.
    assert offered(window, "A") == list(strategy_names(True)) == ["ranged", "ranged-stream"]
    a = window.workspace.panels["A"]
    assert a.strategy() == "ranged" and window.bench.configs.strategy("B") == "ranged"
    assert a.captions["threads"].text() == "Connections:"
    assert a.captions["chunk"].text() == "Part size:"
    assert not a.cache.isEnabled() and "cold" not in a.spec_line.text()
    window.bench.run("A")
    qtbot.waitUntil(lambda: bool(window.bench.records), timeout=60_000)
    wait_idle(qtbot, window)
    (record,) = window.bench.records
    assert record.status == "ok", record.message
    assert cell_text(record, CACHE) == "nothing cached locally"
    status = cell_text(record, STATUS)
    assert "GETs · first byte" in status and "median" in status and "p99" in status
    assert "0 retries" in status and "0 throttled" in status
    assert not any("cold" in cell_text(record, column) for column in range(len(COLUMNS)))
    # The exports carry the request figures, and no credential.
    (row,) = csv.DictReader(io.StringIO(results_csv([record], None).decode()))
    assert int(row["requests"]) >= 3 and row["retries"] == "0" and row["throttles"] == "0"
    assert float(row["first_byte_median_seconds"]) > 0
    document = results_json(SHARDED, [record], None, None).decode()
    assert '"object_reads"' in document and SECRET_KEY not in document
    # Kept: the URL (in the history and the recent models), never a credential.
    assert window.settings.urls() == [SHARDED] and window.recent.paths()[0] == SHARDED
    window.close()
    assert SECRET_KEY not in everything_written(tmp_path / "modelmon.ini")
    # A file opened next gets the file strategies back.
    window.open_path(str(small_model))
    qtbot.waitUntil(lambda: window.bench.info is not None and not window.bench.info.in_bucket)
    assert offered(window, "A") == list(strategy_names(False))
    assert window.workspace.panels["A"].strategy() == "sequential"
    assert window.workspace.panels["A"].captions["threads"].text() == "Threads:"


def test_a_bucket_models_facts_sit_beside_its_configurations_at_1000_px(
    qtbot, window: MainWindow, rclone_s3: SimpleNamespace
):
    """As a file's do: the object strategies' wider captions ("Connections:") and an ETag,
    one word of 34 characters, had put them under A and B, and the panel scrolled sideways."""
    assert answer_url_dialog(qtbot, window, SHARDED) is None
    qtbot.waitUntil(lambda: window.bench.info is not None, timeout=20_000)
    window.resize(1000, 700)
    qtbot.waitUntil(lambda: window.width() == 1000 and window.height() == 700)
    QApplication.processEvents()
    workspace = window.workspace
    assert workspace.top_scroll.widget().narrow is False
    facts = workspace.model_scroll
    assert facts.horizontalScrollBar().maximum() == 0, "the facts scroll sideways"
    files = window.bench.info.model.files
    shown = workspace.model_panel.values["readahead"]
    assert shown.text().startswith(f"the first of {len(files)} objects: ETag ")
    for file in files:  # each whole in its tip
        assert file.remote.etag not in shown.text() and file.remote.etag in shown.toolTip()


def test_open_url_names_an_endpoint_and_a_profile_and_keeps_no_secret(
    qtbot,
    window: MainWindow,
    rclone_s3: SimpleNamespace,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
):
    """The environment points nowhere and holds no key; the dialog names the server and a
    profile of ~/.aws whose keys sign: the model opens, and only the names are kept."""
    endpoint = rclone_s3.env["AWS_ENDPOINT_URL"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA-not-ours")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-1f3")
    Path(rclone_s3.env["AWS_SHARED_CREDENTIALS_FILE"]).write_text(
        f"[walk]\naws_access_key_id = testkey\naws_secret_access_key = {SECRET_KEY}\n"
    )
    seen: list[object] = []

    def answer(url: str, server: str, profile: str) -> None:
        def fill() -> None:
            dialog = window.dialog
            seen.append([dialog.profile.itemText(i) for i in range(dialog.profile.count())])
            dialog.field.setEditText(url)
            dialog.endpoint.setText(server)
            dialog.profile.setEditText(profile)
            dialog.accept()
            if dialog.isVisible():
                seen.append(dialog.error.text())
                dialog.reject()

        QTimer.singleShot(0, fill)
        window.choose_url()

    answer(SHARDED, f"http://testkey:{SECRET_KEY}@127.0.0.1:1", "walk")
    refused = seen[-1]
    assert isinstance(refused, str) and "refused" in refused and SECRET_KEY not in refused
    assert window.bench.info is None
    answer(SHARDED, endpoint, "walk")
    assert seen[0] == ["walk"]  # the profiles of ~/.aws offered, by name
    qtbot.waitUntil(lambda: window.bench.info is not None, timeout=20_000)
    panel = window.workspace.model_panel
    assert panel.values["device"].text().startswith(endpoint)
    assert "shared-credentials-file" in panel.values["rotational"].text()  # its "Access" row
    window.bench.run("A")
    qtbot.waitUntil(lambda: bool(window.bench.records), timeout=60_000)
    wait_idle(qtbot, window)
    assert window.bench.records[-1].status == "ok", window.bench.records[-1].message
    assert window.settings.bucket_access() == (endpoint, "walk")
    window.close()  # the environment as it was before
    assert os.environ["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == "not-the-secret-1f3"
    assert "AWS_PROFILE" not in os.environ and "AWS_ENDPOINT_URL_S3" not in os.environ
    written = everything_written(tmp_path / "modelmon.ini")
    assert endpoint in written and "walk" in written and SECRET_KEY not in written


def test_a_url_with_credentials_is_refused_in_the_dialog_and_never_kept(
    qtbot, window: MainWindow, rclone_s3: SimpleNamespace, tmp_path: Path
):
    said = answer_url_dialog(qtbot, window, f"s3://testkey:{SECRET_KEY}@{BUCKET}/single/")
    assert said is not None and "credentials in it is refused" in said
    assert SECRET_KEY not in said and "\n" not in said
    assert window.bench.info is None and window.settings.urls() == []
    window.close()
    assert SECRET_KEY not in everything_written(tmp_path / "modelmon.ini")


@pytest.mark.parametrize(
    ("env", "url", "says"),
    [
        ({"AWS_SECRET_ACCESS_KEY": "not-the-secret-1f3"}, f"s3://{BUCKET}/single/", "403"),
        ({}, f"s3://{BUCKET}/missing/model.safetensors", "404"),
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, f"s3://{BUCKET}/single/", "cannot reach"),
    ],
    ids=["wrong-secret", "missing-key", "endpoint-down"],
)
def test_a_bucket_that_refuses_is_one_line_in_the_window(
    qtbot,
    window: MainWindow,
    rclone_s3: SimpleNamespace,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    url: str,
    says: str,
):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    window.open_path(url)
    qtbot.waitUntil(lambda: window.messages.isVisible() and window.messages.level == "error")
    line = window.messages.text.text()
    assert says in line and url.rstrip("/") in line, line
    assert "\n" not in line and "Traceback" not in line
    assert SECRET_KEY not in line and "not-the-secret-1f3" not in line
    assert window.bench.info is None and not window.start_page.busy.isVisible()


def test_the_start_page_lists_the_models_under_a_kept_prefix(
    qtbot, window: MainWindow, rclone_s3: SimpleNamespace, settings, tmp_path: Path
):
    bucket = window.start_page.bucket
    bucket.prefix.setText(f"s3://{BUCKET}")
    bucket.list_button.click()
    state = window.state.bucket
    qtbot.waitUntil(lambda: state.listed is not None and not state.listing, timeout=20_000)
    assert state.error is None
    references = [row.reference for row in state.rows]
    assert SHARDED in references and f"s3://{BUCKET}/gguf/tiny-Q8_0.gguf" in references
    sharded = next(row for row in state.rows if row.reference == SHARDED)
    assert sharded.files == 3 and sharded.format == "safetensors"
    assert bucket.table.rowCount() == len(state.rows)
    assert f"under s3://{BUCKET}/" in bucket.summary.text()
    assert window.settings.bucket_prefix() == f"s3://{BUCKET}/"
    # Listed again (List with the same prefix): the same models, each once, drawn once.
    listed = state.listed
    state.listed = None
    bucket.list_button.click()
    qtbot.waitUntil(lambda: state.listed == listed and not state.listing, timeout=20_000)
    assert [row.reference for row in state.rows] == references
    assert len(set(references)) == len(references) == bucket.table.rowCount()
    bucket.table.cellDoubleClicked.emit(references.index(SHARDED), 0)
    qtbot.waitUntil(lambda: window.bench.info is not None, timeout=20_000)
    assert window.bench.info.path == SHARDED
    # Kept for the next session, which lists it when its window shows.
    window.close()
    again = MainWindow(settings=settings, discover=window.state.discovery.discover)
    qtbot.addWidget(again)
    again.show()
    qtbot.waitUntil(lambda: again.state.bucket.listed is not None, timeout=20_000)
    assert SHARDED in [row.reference for row in again.state.bucket.rows]
    assert again.start_page.bucket.prefix.text() == f"s3://{BUCKET}/"
    again.close()


def test_a_prefix_that_cannot_be_listed_says_why(
    qtbot, window: MainWindow, rclone_s3: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
):
    bucket, state = window.start_page.bucket, window.state.bucket
    bucket.prefix.setText("https://example.invalid/models/")
    bucket.list_button.click()
    assert "there is no listing" in bucket.summary.text() and state.prefix is None
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-1f3")
    bucket.prefix.setText(f"s3://{BUCKET}/")
    bucket.list_button.click()
    qtbot.waitUntil(lambda: state.listed is not None and not state.listing, timeout=20_000)
    assert state.rows == [] and "403" in bucket.summary.text()
    assert "not-the-secret-1f3" not in bucket.summary.text()


def test_an_ab_of_a_bucket_model_runs_and_never_says_cold(
    qtbot, window: MainWindow, rclone_s3: SimpleNamespace
):
    window.open_path(f"s3://{BUCKET}/single/")
    qtbot.waitUntil(lambda: window.bench.info is not None, timeout=20_000)
    window.bench.run_ab(1)
    qtbot.waitUntil(lambda: window.bench.running, timeout=5_000)
    wait_idle(qtbot, window, 120_000)
    ab = window.bench.ab.result
    assert ab is not None and [side for side, _ in ab.runs] == ["A", "B"]
    assert all(result.object_reads is not None for _, result in ab.runs)
    (line,) = [line for line in ab_detail_lines(ab) if line.startswith("pairs")]
    assert line.endswith("nothing cached locally (object storage)") and "cold" not in line


def test_a_url_query_is_sent_whole_and_shown_written_and_kept_nowhere(
    qtbot, window: MainWindow, moto_server: MotoS3, bucket_root: Path, tmp_path: Path
):
    secret = "gUi-qUeRy-sEcReT-never-written-60c2"
    with FaultProxy(moto_server.port, bucket_root).start() as proxy:
        url = f"{proxy.endpoint}/{BUCKET}/single/model.safetensors?auth={secret}"
        assert answer_url_dialog(qtbot, window, url) is None
        qtbot.waitUntil(lambda: window.bench.info is not None, timeout=20_000)
        info = window.bench.info
        assert info.path == url.replace(secret, "REDACTED") and not info.keepable
        window.bench.run("A")
        qtbot.waitUntil(lambda: bool(window.bench.records), timeout=60_000)
        wait_idle(qtbot, window)
        (record,) = window.bench.records
        assert record.status == "ok", record.message
        shown = [window.windowTitle(), info.name, window.messages.text.text()]
        shown += [label.text() for label in window.workspace.model_panel.values.values()]
        shown.append(results_json(info.path, [record], None, None).decode())
        shown.append(results_csv([record], None).decode())
        assert all(secret not in text for text in shown)
        # Every GET carried the query whole, the load's too.
        gets = [seen.path for seen in proxy.seen if seen.method == "GET"]
        assert len(gets) >= 2 and all(path.endswith(f"?auth={secret}") for path in gets)
    # Not kept to open again: it would open only with the secret, which is never kept.
    assert window.settings.urls() == []
    assert not any(f"{BUCKET}/single/model" in path for path in window.recent.paths())
    window.close()
    assert secret not in everything_written(tmp_path / "modelmon.ini")


def test_a_failed_open_url_leaves_the_open_models_access_as_it_was(
    qtbot, window: MainWindow, rclone_s3: SimpleNamespace, tmp_path: Path
):
    """A bucket model open with the environment's access; File ▸ Open URL… of another with a
    profile that is nowhere, then with an endpoint nothing listens on: each fails in one
    line, and the open model is still read as it was opened (its Run A reads it)."""
    assert answer_url_dialog(qtbot, window, SHARDED) is None
    qtbot.waitUntil(lambda: window.bench.info is not None, timeout=20_000)
    panel = window.workspace.model_panel
    shown = {name: value.text() for name, value in panel.values.items()}
    environment = dict(os.environ)
    kept = window.settings.bucket_access()
    unreachable = "http://127.0.0.1:9"

    def fail_to_open(server: str, profile: str) -> str:
        def fill() -> None:
            dialog = window.dialog
            dialog.field.setEditText(f"s3://{BUCKET}/single/")
            dialog.endpoint.setText(server)
            dialog.profile.setEditText(profile)
            dialog.accept()

        QTimer.singleShot(0, fill)
        window.choose_url()
        qtbot.waitUntil(
            lambda: window.messages.isVisible() and window.messages.level == "error",
            timeout=30_000,
        )
        return window.messages.text.text()

    # The model open already, asked for with another profile: said, not dropped silently.
    def fill_same() -> None:
        dialog = window.dialog
        dialog.field.setEditText(SHARDED)
        dialog.profile.setEditText("nosuchprofile")
        dialog.accept()

    QTimer.singleShot(0, fill_same)
    window.choose_url()
    qtbot.waitUntil(lambda: window.messages.isVisible(), timeout=10_000)
    said = window.messages.text.text()
    assert said.startswith(f"{SHARDED} is open already, read with ") and "nosuchprofile" in said
    said = fail_to_open("", "nosuchprofile")
    assert "nosuchprofile" in said and "File ▸ Open URL… names it" in said, said
    assert "AWS_PROFILE" not in said
    said = fail_to_open(unreachable, "")
    assert "cannot reach" in said and unreachable in said, said
    assert window.bench.info is not None and window.bench.info.path == SHARDED
    window.bench.run("A")
    qtbot.waitUntil(lambda: bool(window.bench.records), timeout=60_000)
    wait_idle(qtbot, window)
    assert window.bench.records[-1].status == "ok", window.bench.records[-1].message
    assert dict(os.environ) == environment and window.url_opening.access.current == Access()
    assert window.settings.bucket_access() == kept
    assert {name: value.text() for name, value in panel.values.items()} == shown
