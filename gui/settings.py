"""What the app remembers between sessions, in QSettings: one key per concept, all here.

The location is injectable: a QSettings given to MainWindow (tests use a file in tmp_path),
else the file named by MODELMON_SETTINGS (the screenshot script), else the platform's
place for organisation and application "modelmon".
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

from PySide6.QtCore import QByteArray, QSettings

from modelmon.core.configuration import program_kind
from modelmon.core.errors import ModelmonError
from modelmon.core.limits import MAX_BUDGET_S, MIN_BUDGET_S
from modelmon.core.options import PRIME_MODES, LoadOptions, PrimeMode, format_spec, parse_spec

Number = TypeVar("Number", int, float)

SETTINGS_ENV = "MODELMON_SETTINGS"
GEOMETRY = "window/geometry"
CONFIG = "ab/config_{label}"  # the strategy spec of configuration A or B, as parse_spec reads it
OBJECT_CONFIG = "ab/object_config_{label}"  # the same for a model in object storage
PAIRS = "ab/pairs"
RECOMMEND_BUDGET = "recommend/budget_s"  # the last budget Run ▸ Recommend… measured with
EXPORT_FOLDER = "export/folder"
THEME = "view/theme"  # "system" | "light" | "dark"
SAMPLE_MS = "metrics/sample_ms"
SAMPLE_CHOICES_MS = (50, 100, 250, 500)  # 100: the default; 50 for short loads, more for long
PRIME_MEMORY = "measure/prime_memory"  # one of core.options.PRIME_MODES
MEMORY_LIMIT = "measure/memory_limit"  # Run ▸ Memory limit… as written ("4Gi"); empty: none
CEILINGS = "ceilings/{key}"  # a model's ceilings on its storage, JSON (state/ceilings_state.py)
BUCKET_PREFIX = "bucket/prefix"  # the s3:// prefix the start page lists (a URL, no credential)
BUCKET_ENDPOINT = "bucket/endpoint"  # the S3 endpoint named in Open URL (no credential)
BUCKET_PROFILE = "bucket/profile"  # the AWS profile named there: a name, never its keys
URL_HISTORY = "open/urls"  # the URLs File ▸ Open URL… opened, newest first
MAX_URLS = 10
THEMES = ("system", "light", "dark")


def open_settings(path: str | None = None) -> QSettings:
    """The settings at ``path`` (INI), else at $MODELMON_SETTINGS, else the platform's own."""
    path = path or os.environ.get(SETTINGS_ENV)
    if path:
        return QSettings(path, QSettings.Format.IniFormat)
    return QSettings("modelmon", "modelmon")


class AppSettings:
    """Typed access to the keys above; values that don't parse read as "not set"."""

    def __init__(self, settings: QSettings) -> None:
        self.qsettings = settings

    def _set(self, key: str, value: object) -> None:
        self.qsettings.setValue(key, value)
        self.qsettings.sync()

    def _text(self, key: str) -> str | None:
        value = self.qsettings.value(key)
        return value if isinstance(value, str) and value else None

    def _number(self, key: str, kind: type[Number]) -> Number | None:
        """The value kept under ``key`` as ``kind``; None where none is kept or it is not one
        (a settings file edited by hand)."""
        value: Any = self.qsettings.value(key)
        try:
            return kind(value) if value is not None else None
        except (TypeError, ValueError):
            return None

    def geometry(self) -> QByteArray | None:
        value = self.qsettings.value(GEOMETRY)
        return value if isinstance(value, QByteArray) and not value.isEmpty() else None

    def set_geometry(self, geometry: QByteArray) -> None:
        self._set(GEOMETRY, geometry)

    def config(self, label: str, objects: bool = False) -> tuple[str, LoadOptions] | None:
        spec = self._text((OBJECT_CONFIG if objects else CONFIG).format(label=label))
        if spec is None:
            return None
        if program_kind(spec) is not None:  # a command or an engine: kept as typed, checked on use
            return spec, LoadOptions(cache="cold")
        try:
            return parse_spec(spec)
        except (ModelmonError, ValueError, TypeError):
            return None  # written by another version: the defaults are better than an error

    def set_config(
        self, label: str, strategy: str, options: LoadOptions, objects: bool = False
    ) -> None:
        spec = strategy if program_kind(strategy) is not None else format_spec(strategy, options)
        self._set((OBJECT_CONFIG if objects else CONFIG).format(label=label), spec)

    def pairs(self) -> int | None:
        return self._number(PAIRS, int)

    def set_pairs(self, pairs: int) -> None:
        self._set(PAIRS, pairs)

    def recommend_budget(self) -> float | None:
        """The budget of the last search the user started, in whole seconds the dialog takes."""
        seconds = self._number(RECOMMEND_BUDGET, float)
        if seconds is None or not MIN_BUDGET_S <= seconds <= MAX_BUDGET_S:
            return None  # not a number, or out of range: the default is better than an error
        return float(int(seconds))

    def set_recommend_budget(self, seconds: float) -> None:
        if not MIN_BUDGET_S <= seconds <= MAX_BUDGET_S:
            raise ValueError(f"a budget from {MIN_BUDGET_S:g} to {MAX_BUDGET_S:g} s, not {seconds}")
        self._set(RECOMMEND_BUDGET, int(seconds))

    def export_folder(self) -> str | None:
        folder = self._text(EXPORT_FOLDER)
        return folder if folder and os.path.isdir(folder) else None

    def set_export_folder(self, folder: str) -> None:
        self._set(EXPORT_FOLDER, folder)

    def sample_ms(self) -> int | None:
        ms = self._number(SAMPLE_MS, int)
        return ms if ms in SAMPLE_CHOICES_MS else None

    def set_sample_ms(self, ms: int) -> None:
        if ms not in SAMPLE_CHOICES_MS:
            raise ValueError(f"sample every one of {SAMPLE_CHOICES_MS} ms, not {ms}")
        self._set(SAMPLE_MS, ms)

    def theme(self) -> str:
        value = self._text(THEME)
        return value if value in THEMES else "system"

    def set_theme(self, theme: str) -> None:
        if theme not in THEMES:
            raise ValueError(f"theme must be one of {THEMES}, not {theme!r}")
        self._set(THEME, theme)

    def prime_memory(self) -> PrimeMode:
        value = self._text(PRIME_MEMORY)
        return next((mode for mode in PRIME_MODES if mode == value), "auto")

    def set_prime_memory(self, mode: str) -> None:
        if mode not in PRIME_MODES:
            raise ValueError(f"prime memory must be one of {PRIME_MODES}, not {mode!r}")
        self._set(PRIME_MEMORY, mode)

    def memory_limit(self) -> str:
        return self._text(MEMORY_LIMIT) or ""

    def set_memory_limit(self, text: str) -> None:
        self._set(MEMORY_LIMIT, text)

    def bucket_prefix(self) -> str | None:
        return self._text(BUCKET_PREFIX)

    def set_bucket_prefix(self, prefix: str) -> None:
        """``prefix`` as ``bucket_prefix`` parsed it: a URL with credentials never gets here."""
        self._set(BUCKET_PREFIX, prefix)

    def bucket_access(self) -> tuple[str, str]:
        """The endpoint and profile File ▸ Open URL… was last given ("" each: none)."""
        return self._text(BUCKET_ENDPOINT) or "", self._text(BUCKET_PROFILE) or ""

    def set_bucket_access(self, endpoint: str, profile: str) -> None:
        """As ``check_endpoint`` and ``check_profile`` passed them: no credential in either."""
        self._set(BUCKET_ENDPOINT, endpoint)
        self._set(BUCKET_PROFILE, profile)

    def urls(self) -> list[str]:
        value = self.qsettings.value(URL_HISTORY, [])
        stored = [value] if isinstance(value, str) else list(value or [])
        return [url for url in stored if isinstance(url, str) and url][:MAX_URLS]

    def add_url(self, url: str) -> None:
        """``url`` as ``parse_object_url`` wrote it (so with no credential in it), first."""
        self._set(URL_HISTORY, [url, *(u for u in self.urls() if u != url)][:MAX_URLS])

    def load_ceilings(self, key: str) -> str | None:
        return self._text(CEILINGS.format(key=key))

    def save_ceilings(self, key: str, text: str) -> None:
        self._set(CEILINGS.format(key=key), text)
