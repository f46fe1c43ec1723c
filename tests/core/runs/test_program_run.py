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


def test_a_run_another_reader_evicted_unseen_is_not_called_a_lazy_load(sharded_model):
    """A program's run of which a fifth was seen arriving: alone, a lazy load; beside another
    process that held the model's files (and dropped pages between two looks), that reader is
    named as why the run is not timed."""
    import dataclasses

    from modelmon.core import open_model
    from modelmon.core.runs.verdict import judge
    from modelmon.core.watching.result import OtherReader

    from ..watching.test_findings import a_file, a_result

    model = open_model(sharded_model)
    size = model.file_bytes
    seen = a_file(path=model.files[0].path, size=size, bytes_read=size // 5)
    watched = dataclasses.replace(a_result((seen,)), ended_by="exit", read_bytes=size // 5)
    status, why = judge(watched, "", model, settled=False, limit_reached=False)
    assert status == "failed" and why is not None and "a lazy load" in why
    evictor = OtherReader(4242, "vmtouch", (model.files[0].path,), False)
    beside = dataclasses.replace(watched, other_readers=(evictor,))
    status, why = judge(beside, "", model, settled=False, limit_reached=False)
    assert status == "failed" and why is not None and "lazy" not in why
    assert why.startswith("only 20.0% of the model arrived or was touched while another ")
    assert "pid 4242 (vmtouch)" in why and "pages it dropped arrive unseen" in why


def test_a_run_whose_tree_read_the_model_past_the_cache_unseen_is_not_called_lazy(
    sharded_model,
):
    """Nothing arrived in a cold cache and no descriptor was seen, yet the tree read the
    model's size from storage: direct reads between two looks, said so with the way to be
    timed (the program's own report), never called a lazy load."""
    import dataclasses

    from modelmon.core import open_model
    from modelmon.core.runs.command_output import OWN_REPORT
    from modelmon.core.runs.verdict import judge

    from ..watching.test_findings import a_file, a_result

    model = open_model(sharded_model)
    size = model.file_bytes
    nothing = a_file(path=model.files[0].path, size=size, arrived_bytes=0, bytes_read=0)
    watched = dataclasses.replace(a_result((nothing,)), ended_by="exit", read_bytes=size)
    status, why = judge(watched, "", model, settled=False, limit_reached=False)
    assert status == "failed" and why is not None and "lazy" not in why
    assert why.startswith("only 0.0% of the model arrived or was touched, yet its processes")
    assert "past the page cache (O_DIRECT)" in why and OWN_REPORT in why
    unread = dataclasses.replace(watched, read_bytes=size // 100)
    status, why = judge(unread, "", model, settled=False, limit_reached=False)
    assert why is not None and "a lazy load measures nothing" in why
