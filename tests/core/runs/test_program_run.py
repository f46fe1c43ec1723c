def test_a_stderr_without_newlines_is_one_bounded_line():
    """A program that writes 100 MB without a newline leaves a line a person can read."""
    import tempfile

    from modelmon.core.runs.program import LINE_CHARS, last_line

    with tempfile.TemporaryFile() as stream:
        stream.write(b"x" * (100 << 20))
        line = last_line(stream)
    assert len(line) == LINE_CHARS and line.endswith("…")
