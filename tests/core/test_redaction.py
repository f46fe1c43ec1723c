"""The one redaction of every URL modelmon writes (``redact_url``, ``redact_urls``): the user
part, every query value but a harmless one's, the fragment; and the writers that use it
(errors, JSON, config files)."""

from __future__ import annotations

import pytest

from modelmon.core.errors import (
    ModelmonError,
    OptionsError,
    one_line,
    redact_url,
    redact_urls,
)
from modelmon.core.output import dumps
from modelmon.core.output.config_text import render

SECRET = "rEdAcT-sEcReT-never-written-5b3d"


@pytest.mark.parametrize(
    ("url", "written"),
    [
        (f"https://host/m.safetensors?auth={SECRET}", "https://host/m.safetensors?auth=REDACTED"),
        (
            f"https://host/m.gguf?download=true&t={SECRET}&revision=main",
            "https://host/m.gguf?download=true&t=REDACTED&revision=main",
        ),
        (f"https://host/m.gguf?{SECRET}", "https://host/m.gguf?REDACTED"),
        (f"https://host/m.gguf?a=&b={SECRET}", "https://host/m.gguf?a=&b=REDACTED"),
        (f"http://user:{SECRET}@127.0.0.1:9000", "http://REDACTED@127.0.0.1:9000"),
        (f"http://user:{SECRET}@host/p?x={SECRET}", "http://REDACTED@host/p?x=REDACTED"),
        # A password holding "/", "#" or "?" cannot cut the user part short.
        (f"http://user:12/{SECRET}@host/p", "http://REDACTED@host/p"),
        (f"http://user:12#{SECRET}@host/p", "http://REDACTED@host/p"),
        (f"http://user:12?{SECRET}@host/p", "http://REDACTED@host/p"),
        (f"http://127.0.0.1:9000#{SECRET}", "http://127.0.0.1:9000#REDACTED"),
        (
            f"http://127.0.0.1:9000/?X-Amz-Security-Token={SECRET}",
            "http://127.0.0.1:9000/?X-Amz-Security-Token=REDACTED",
        ),
        (f"user:{SECRET}@127.0.0.1:9000", "REDACTED@127.0.0.1:9000"),
        (f"/m.safetensors?auth={SECRET}", "/m.safetensors?auth=REDACTED"),
        # An s3:// key holds "?", "#" and "@" as characters: kept whole; a user part is not.
        ("s3://models/a b#c?d@e.gguf", "s3://models/a b#c?d@e.gguf"),
        (f"s3://AKIA:{SECRET}@models/m.gguf", "s3://REDACTED@models/m.gguf"),
        (f"s3://AKIA:{SECRET}/x@models/m.gguf", "s3://REDACTED@models/m.gguf"),
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
        ("https://host/a%20b/m.gguf?v=2", "https://host/a%20b/m.gguf?v=REDACTED"),
    ],
)
def test_a_url_is_written_redacted_and_redacting_again_changes_nothing(
    url: str, written: str
) -> None:
    assert redact_url(url) == written
    assert redact_url(written) == written
    if "://" in url:  # a URL in running text is known by its scheme
        assert redact_urls(f"at {url}: refused") == f"at {written}: refused"


def test_urls_in_running_text_keep_the_sentence_around_them() -> None:
    text = f"modelmon: https://h/m.gguf?auth={SECRET}: refused (endpoint http://h:9#{SECRET})."
    assert redact_urls(text) == (
        "modelmon: https://h/m.gguf?auth=REDACTED: refused (endpoint http://h:9#REDACTED)."
    )
    assert redact_urls("no URL: /models/m?x=1") == "no URL: /models/m?x=1"


def test_every_error_line_is_redacted() -> None:
    error = OptionsError(f"https://u:{SECRET}@h/m.gguf: a watch sees files")
    assert str(error) == "https://REDACTED@h/m.gguf: a watch sees files"
    assert str(ModelmonError(f"x https://h/m?sig={SECRET}")) == "x https://h/m?sig=REDACTED"
    assert one_line(ValueError(f"Invalid endpoint: http://h/?t={SECRET}\nmore")) == (
        "Invalid endpoint: http://h/?t=REDACTED"
    )


def test_json_and_config_files_are_written_redacted() -> None:
    document = {
        "model": f"https://host/m.safetensors?auth={SECRET}",
        "objects": [{"endpoint": f"http://h:9#{SECRET}", "size": 3.5}],
        f"https://h/?k={SECRET}": ("a", f"cmd https://h/m?x={SECRET}"),
    }
    assert SECRET not in dumps(document)
    assert "auth=REDACTED" in dumps(document)
    assert SECRET not in render(document)
    assert "auth=REDACTED" in render(document)
