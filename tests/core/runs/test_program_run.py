def test_a_stderr_without_newlines_is_one_bounded_line():
    """A program that writes 100 MB without a newline leaves a line a person can read."""
    import tempfile

    from modelmon.core.runs.command_output import LINE_CHARS, last_line

    with tempfile.TemporaryFile() as stream:
        stream.write(b"x" * (100 << 20))
        line = last_line(stream)
    assert len(line) == LINE_CHARS and line.endswith("…")


def test_an_engines_report_is_found_after_megabytes_of_its_output():
    """The harness's report is its last line; what the engine printed before is not read."""
    import json
    import tempfile

    from modelmon.core.runs.command_output import own_report

    report = {"engine": "transformers", "bytes": 123}
    with tempfile.TemporaryFile() as stream:
        stream.write(b"Loading checkpoint shards: 50%\r" * (1 << 18) + b"\n")
        stream.write(json.dumps(report).encode() + b"\n")
        assert own_report(stream) == report
        stream.write(b"a last line that is not a report\n")
        assert own_report(stream) == report
        # Only the end is read: a report that far back is not the run's last word.
        stream.write(b"warning: " + b"x" * (64 << 10) + b"\n")
        assert own_report(stream) is None
