"""The storage timeout: one figure bounds every wait of a read of object storage, in this
process and in the workers it starts (which inherit it through the environment)."""

from __future__ import annotations

import os

import pytest

from modelmon.core.errors import OptionsError
from modelmon.core.limits import DEFAULT_STORAGE_TIMEOUT_S, STORAGE_TIMEOUT_ENV
from modelmon.core.storage import storage_timeout
from modelmon.core.storage.policy import Timeouts, read_policy, store_timeouts


def test_the_default_bounds_a_silent_endpoint_at_one_read_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(STORAGE_TIMEOUT_ENV, raising=False)
    assert read_policy().patience_s == DEFAULT_STORAGE_TIMEOUT_S == Timeouts().read_s
    assert store_timeouts() == Timeouts()


def test_a_storage_timeout_bounds_every_wait_and_is_inherited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(STORAGE_TIMEOUT_ENV, raising=False)
    with storage_timeout(2):
        assert os.environ[STORAGE_TIMEOUT_ENV] == "2"  # what a worker process inherits
        assert read_policy().patience_s == 2.0
        assert store_timeouts() == Timeouts(connect_s=2.0, read_s=2.0)
    assert STORAGE_TIMEOUT_ENV not in os.environ
    with storage_timeout(600):
        assert read_policy().patience_s == 600.0 and store_timeouts() == Timeouts()


@pytest.mark.parametrize("text", ["soon", "0", "-5", "nan", "1e9"])
def test_a_storage_timeout_that_is_not_one_is_refused(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv(STORAGE_TIMEOUT_ENV, text)
    with pytest.raises(OptionsError, match=f"{STORAGE_TIMEOUT_ENV} must be a number from 1 to"):
        read_policy()
    refused = pytest.raises(OptionsError, match="the storage timeout must be a number from 1 to")
    with refused, storage_timeout(float(text) if text != "soon" else 0):
        pass
