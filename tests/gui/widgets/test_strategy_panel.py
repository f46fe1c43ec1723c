"""The configuration editor: what each strategy uses, and round trips of the options."""

from __future__ import annotations

from modelmon.core import STRATEGIES
from modelmon.core.options import LoadOptions, parse_spec
from modelmon.gui.state.load_config import KNOBS
from modelmon.gui.widgets.strategy_panel import TIPS, StrategyPanel


def test_options_a_strategy_does_not_use_are_disabled(qtbot):
    panel = StrategyPanel("A")
    qtbot.addWidget(panel)
    for name, cls in STRATEGIES.items():
        panel.strategy_box.setCurrentText(name)
        for option, widget in panel._knobs.items():
            # A bucket's load has no local cache to ask a state of: its knob is greyed.
            used = option in cls.uses and not (cls.reads_objects and option == "cache")
            assert widget.isEnabled() == used, (name, option)
        assert panel.strategy_box.toolTip() == cls.summary


def test_every_knob_explains_itself(qtbot):
    panel = StrategyPanel("B")
    qtbot.addWidget(panel)
    assert set(panel._knobs) == set(KNOBS)  # one knob for each option the panel edits
    for option, widget in panel._knobs.items():
        assert widget.toolTip().startswith(TIPS[option])
    assert panel.run_button.text() == "Run B" and panel.run_button.toolTip()


def test_set_config_round_trips_and_the_spec_names_only_used_options(qtbot):
    panel = StrategyPanel("A")
    qtbot.addWidget(panel)
    options = LoadOptions(
        workers=3, threads=2, chunk=3 << 20, fadvise="sequential", cache="warm", verify=True
    )
    panel.set_config("sequential", options)
    assert panel.options() == options  # 3 MiB is no preset: it was added to the list
    assert parse_spec(panel.spec()) == ("sequential", options)
    panel.strategy_box.setCurrentText("mmap-shared-fd")  # uses no fadvise, no partition
    assert panel.options().fadvise == "none"
    assert "fadvise" not in panel.spec_line.text()


def test_a_model_larger_than_ram_locks_discard_on(qtbot):
    panel = StrategyPanel("A")
    qtbot.addWidget(panel)
    panel.require_discard(True)
    assert panel.options().discard and not panel.discard.isEnabled()
    panel.require_discard(False)
    panel.discard.setChecked(False)
    assert not panel.options().discard


def test_readahead_is_greyed_out_with_the_reason_where_it_cannot_be_set(qtbot):
    panel = StrategyPanel("A")
    qtbot.addWidget(panel)
    panel.set_config("mmap", LoadOptions(readahead=4096))
    assert panel.options().readahead == 4096 and "readahead=4096" in panel.spec()
    panel.set_config("mmap", LoadOptions())
    assert panel.options().readahead is None
    panel.readahead.setCurrentIndex(panel.readahead.findData(1024))
    assert panel.options().readahead == 1024
    panel.set_readahead_unavailable("no write access to /sys/block/vda/queue/read_ahead_kb")
    assert not panel.readahead.isEnabled() and "no write access" in panel.readahead.toolTip()
    assert panel.options().readahead is None
    panel.set_readahead_unavailable(None)
    assert panel.readahead.isEnabled() and panel.options().readahead == 1024
    panel.strategy_box.setCurrentText("direct")
    assert not panel.readahead.isEnabled() and "O_DIRECT" in panel.readahead.toolTip()


def test_a_buckets_line_speaks_in_connections_and_part_size_as_its_knobs(qtbot):
    panel = StrategyPanel("A")
    qtbot.addWidget(panel)
    panel.set_config("ranged", LoadOptions(threads=4, chunk=16 << 20))
    assert panel.captions["threads"].text() == "Connections:" and panel.threads.value() == 4
    assert panel.captions["chunk"].text() == "Part size:"
    assert panel.spec_line.text() == "ranged: 4 connections, 16 MiB parts"
    # The command line's words are in its tooltip, said for what they are here.
    tip = panel.spec_line.toolTip()
    assert "ranged workers=1 threads=4 chunk=16MiB" in tip and "threads: the connections" in tip
    panel.set_config("ranged-stream", LoadOptions(workers=2, threads=1, verify=True))
    assert panel.spec_line.text() == (
        "ranged-stream: 2 workers × 1 connection each, 8 MiB parts, verify"
    )
    panel.set_config("sequential", LoadOptions(threads=4))  # a file's: as the CLI says it
    assert panel.spec_line.text().startswith("sequential workers=1 threads=4")
