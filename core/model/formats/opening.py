"""Opening a model file for parsing: through ``core.system.files`` (regular files only, so a
FIFO or device named as a model never hangs a parse), every refusal a ModelFormatError."""

from __future__ import annotations

import os
from typing import BinaryIO

from modelmon.core.errors import ModelFormatError
from modelmon.core.system.files import UnusableFile, open_regular, size_problem


def open_model_file(path: str | os.PathLike[str]) -> BinaryIO:
    """A binary file object on the regular file at ``path`` whose size is what it holds (not
    a /proc or /sys file); ModelFormatError otherwise."""
    try:
        fd = open_regular(path)
    except UnusableFile as exc:
        raise ModelFormatError(str(path), exc.reason) from None
    try:
        problem = size_problem(fd)
    except OSError as exc:
        problem = (exc.strerror or str(exc)).lower()
    if problem is not None:
        os.close(fd)
        raise ModelFormatError(str(path), problem)
    return os.fdopen(fd, "rb")
