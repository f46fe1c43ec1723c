"""The PDF reader the figure tests use reads every stream whole: a compressed stream's
bytes may end in a carriage return, just before the end of line that precedes
"endstream" (one page in 256: the figure tests then found no text at all)."""

from __future__ import annotations

import os
import zlib

from .pdf_checks import content_streams, pdf_texts


def compressed_ending_in_carriage_return() -> tuple[bytes, bytes]:
    while True:
        body = b"BT (\x00h\x00i) Tj ET % " + os.urandom(4).hex().encode()
        packed = zlib.compress(body)
        if packed.endswith(b"\r"):
            return body, packed


def test_a_stream_ending_in_a_carriage_return_is_read_whole():
    body, packed = compressed_ending_in_carriage_return()
    for end_of_line in (b"\n", b"\r\n"):
        data = b"1 0 obj\n<< /Length 2 0 R >>\nstream\n" + packed + end_of_line + b"endstream\n"
        assert content_streams(data) == [body]
        assert pdf_texts(data) == ["hi"]


def test_a_stream_that_does_not_inflate_whole_is_left_out():
    _, packed = compressed_ending_in_carriage_return()
    data = b"stream\n" + packed[: len(packed) // 2] + b"\nendstream\n"
    assert content_streams(data) == []
