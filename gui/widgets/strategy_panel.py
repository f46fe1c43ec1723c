"""A load configuration editor: strategy and its options, with its own Run button.

It draws a configuration (``set_config``, from the state's ``Configs``) and says what the
user made of it (``edited``); the state holds the configuration. Options the chosen
strategy doesn't use are disabled, saying so in their tooltip.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QGroupBox,
    QLabel,
    QPushButton,
    QSpinBox,
    QWidget,
)

from modelmon.core.options import (
    CACHE_MODES,
    FADVISE_HINTS,
    MADVISE_HINTS,
    MAX_PARALLEL,
    PARTITIONS,
    PREFETCH_MODES,
    LoadOptions,
)
from modelmon.gui.state.load_config import (
    CHUNK_SIZES,
    READAHEAD_CHOICES,
    chunk_text,
    effective_options,
    full_spec_text,
    readahead_blocked,
    readahead_text,
    reads_objects,
    spec_text,
    strategy_choices,
    strategy_summary,
    summary_text,
    used_options,
)
from modelmon.gui.state.programs import (
    COMMAND_CHOICE,
    PROGRAM_OPTIONS,
    SideChoice,
    engine_choices,
    engine_settings,
    is_program,
)
from modelmon.gui.state.programs import (
    TIPS as PROGRAM_TIPS,
)
from modelmon.gui.theme import current_theme
from modelmon.gui.widgets.elided_label import ElidedLabel
from modelmon.gui.widgets.program_editor import ProgramEditor

# One sentence per knob: what it changes in the load.
TIPS = {
    "strategy": "How the bytes are read; hover a strategy in the list for what it does.",
    "workers": "Worker processes that load in parallel, each with its own share of tensors.",
    "threads": "Threads inside each worker process, each reading its own part of the share.",
    "chunk": "Bytes per read call (per copied piece for mmap strategies): small means many "
    "system calls.",
    "fadvise": "posix_fadvise hint given on each file descriptor before reading; it changes "
    "the kernel's readahead.",
    "madvise": "madvise hint given on each memory mapping (mmap strategies only).",
    "partition": "How tensors are dealt to workers: contiguous byte ranges, or round-robin "
    "(scattered).",
    "cache": "Page-cache state to start from, verified before the load: cold (pages dropped), "
    "warm (pre-read) or keep (as found).",
    "prefetch": "How the warmup strategy pre-reads: a parallel read pass, "
    "POSIX_FADV_WILLNEED, or both.",
    "verify": "crc32 of every tensor (the same digest for every strategy) to prove the bytes "
    "are right.",
    "discard": "Stream through bounded buffers and keep nothing: measures models larger than RAM.",
    "readahead": "The device's readahead (read_ahead_kb), set for the run and restored after "
    "it; needs write access to it.",
}
# The same knobs as a strategy that reads objects by ranged GETs uses them.
OBJECT_CAPTIONS = {"threads": "Connections", "chunk": "Part size"}
OBJECT_TIPS = {
    "threads": "Connections to the endpoint in each worker, each with one ranged GET in "
    "flight at a time.",
    "chunk": "Bytes asked for by each ranged GET (the part size).",
    "cache": "Nothing of a bucket is cached on this machine: every load reads from the "
    "server (a cache in the server is the server's).",
}


class StrategyPanel(QGroupBox):
    """Edits one (strategy, LoadOptions) pair; ``run_requested`` when its Run button is hit."""

    run_requested = Signal()
    edited = Signal(str, object)  # strategy, LoadOptions: the user changed a knob

    def __init__(self, label: str, parent: QWidget | None = None) -> None:
        super().__init__(f"Configuration {label}", parent)
        self.label = label
        self.strategy_box = QComboBox()
        # What each row of the box chooses, by row: a strategy, the command, an engine.
        self.choices: list[SideChoice] = []
        for name, summary in strategy_choices():
            self._add_choice(name, SideChoice("strategy", name), summary, True)
        # Another program as the configuration: the user's command, or an engine as its
        # users run it (those that cannot run here listed greyed, saying why).
        engines = engine_choices()
        self.program = ProgramEditor(engines)
        self.program.changed.connect(self._on_change)
        self.strategy_box.insertSeparator(self.strategy_box.count())
        self.choices.append(SideChoice("separator"))
        self._add_choice(COMMAND_CHOICE, SideChoice("command"), PROGRAM_TIPS["command"], True)
        for engine in engines:
            tip = engine.why_not or f"{engine.label}: {PROGRAM_TIPS['engine']}"
            self._add_choice(
                engine.title, SideChoice("engine", engine.name), tip, engine.why_not is None
            )
        self.workers = self._spin(1, MAX_PARALLEL)
        self.threads = self._spin(1, MAX_PARALLEL)
        self.chunk = QComboBox()
        for size in CHUNK_SIZES:
            self.chunk.addItem(chunk_text(size), size)
        self.fadvise = self._choices(FADVISE_HINTS)
        self.madvise = self._choices(MADVISE_HINTS)
        self.partition = self._choices(PARTITIONS)
        self.cache = self._choices(CACHE_MODES)
        self.prefetch = self._choices(PREFETCH_MODES)
        self.verify = QCheckBox("verify")
        self.discard = QCheckBox("discard")
        # A knob of the machine, not of the strategy: outside ``_knobs``, enabled where the
        # model's device lets it be set (``set_readahead_unavailable``).
        self.readahead = QComboBox()
        for kb in READAHEAD_CHOICES:
            self.readahead.addItem(readahead_text(kb), kb)
        self._readahead_unavailable: str | None = None
        self.run_button = QPushButton(f"Run {label}")
        self.run_button.setToolTip(
            f"Load the model once with configuration {label} and measure it."
        )
        # The configuration as the command line writes it, on one line: in a small window it
        # ends in "…" (the whole in its tooltip) rather than take a row of the results.
        self.spec_line = ElidedLabel()
        self._discard_forced = False
        self._offered: tuple[str, ...] | None = None  # the strategies the open model can use
        self.captions: dict[str, QLabel] = {}
        self._applying = False  # set_config is drawing the state's configuration
        colour = current_theme().run_colour(label)
        self.setStyleSheet(f"QGroupBox::title {{ color: {colour}; font-weight: bold; }}")
        self._layout()
        self._knobs = {
            "workers": self.workers,
            "threads": self.threads,
            "chunk": self.chunk,
            "fadvise": self.fadvise,
            "madvise": self.madvise,
            "partition": self.partition,
            "cache": self.cache,
            "prefetch": self.prefetch,
            "verify": self.verify,
            "discard": self.discard,
        }
        for widget in (self.strategy_box, self.readahead, *self._knobs.values()):
            signal = (
                getattr(widget, "currentIndexChanged", None)
                or getattr(widget, "valueChanged", None)
                or widget.toggled
            )
            signal.connect(self._on_change)
        self.run_button.clicked.connect(self.run_requested)
        self._on_change()

    def _layout(self) -> None:
        grid = QGridLayout(self)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(4)
        # The Run button on the first row: in a short window the panel scrolls, and the
        # button stays in sight with the strategy it runs.
        grid.addWidget(self._caption("strategy", "Strategy"), 0, 0)
        grid.addWidget(self.strategy_box, 0, 1, 1, 2)
        grid.addWidget(self.run_button, 0, 3)
        pairs = (
            ("workers", self.workers, "threads", self.threads),
            ("chunk", self.chunk, "cache", self.cache),
            ("fadvise", self.fadvise, "madvise", self.madvise),
            ("partition", self.partition, "prefetch", self.prefetch),
        )
        for row, (left, left_widget, right, right_widget) in enumerate(pairs, start=1):
            grid.addWidget(self._caption(left, left.capitalize()), row, 0)
            grid.addWidget(left_widget, row, 1)
            grid.addWidget(self._caption(right, right.capitalize()), row, 2)
            grid.addWidget(right_widget, row, 3)
        self.verify.setToolTip(TIPS["verify"])
        self.discard.setToolTip(TIPS["discard"])
        # Readahead on the row of the two switches: one row more would not fit at 1000×700.
        grid.addWidget(self._caption("readahead", "Readahead"), 5, 0)
        grid.addWidget(self.readahead, 5, 1)
        grid.addWidget(self.verify, 5, 2, 1, 2)
        grid.addWidget(self.discard, 5, 3, Qt.AlignmentFlag.AlignRight)
        grid.addWidget(self.program, 6, 0, 1, 4)
        grid.addWidget(self.spec_line, 7, 0, 1, 4)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 1)
        grid.setRowStretch(8, 1)

    def _add_choice(self, text: str, choice: SideChoice, tip: str, usable: bool) -> None:
        row = self.strategy_box.count()
        self.strategy_box.addItem(text)
        self.choices.append(choice)
        self.strategy_box.setItemData(row, tip, Qt.ItemDataRole.ToolTipRole)
        if not usable:
            item = self.strategy_box.model().item(row)  # type: ignore[attr-defined]
            item.setEnabled(False)

    def _choice(self) -> tuple[str, str | None]:
        """("strategy", name), ("command", None) or ("engine", name): what is chosen."""
        row = self.strategy_box.currentIndex()
        choice = self.choices[row] if 0 <= row < len(self.choices) else SideChoice("strategy")
        if choice.kind == "strategy":
            return "strategy", choice.name or self.strategy_box.currentText()
        return choice.kind, choice.name

    def _caption(self, key: str, text: str) -> QLabel:
        caption = QLabel(f"{text}:")
        caption.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        caption.setToolTip(TIPS[key])
        self.captions[key] = caption
        return caption

    def set_strategies(self, names: tuple[str, ...]) -> None:
        """Offer only ``names`` (a file's strategies, or a bucket's); programs stay."""
        self._offered = names
        view, model = self.strategy_box.view(), self.strategy_box.model()
        for row, choice in enumerate(self.choices):
            if choice.kind != "strategy":
                continue
            offered = choice.name in names
            view.setRowHidden(row, not offered)  # type: ignore[attr-defined]
            model.item(row).setEnabled(offered)  # type: ignore[attr-defined]
        self._on_change()

    def set_format(self, model_format: str | None) -> None:
        """Grey the engines that cannot load a model of ``model_format``, saying why."""
        choices = {e.name: e for e in engine_choices(model_format)}
        model = self.strategy_box.model()
        for row, side in enumerate(self.choices):
            choice = choices.get(str(side.name)) if side.kind == "engine" else None
            if choice is None:
                continue
            tip = choice.why_not or f"{choice.label}: {PROGRAM_TIPS['engine']}"
            self.strategy_box.setItemData(row, tip, Qt.ItemDataRole.ToolTipRole)
            model.item(row).setEnabled(choice.why_not is None)  # type: ignore[attr-defined]

    @staticmethod
    def _spin(low: int, high: int) -> QSpinBox:
        spin = QSpinBox()
        spin.setRange(low, high)
        return spin

    @staticmethod
    def _choices(values: tuple[str, ...]) -> QComboBox:
        box = QComboBox()
        box.addItems(list(values))
        return box

    # --- the configuration ------------------------------------------------------------------

    def strategy(self) -> str:
        """A strategy's name, or a program's spec (``cmd: ...``, ``engine: ...``)."""
        kind, name = self._choice()
        return self.program.spec() if kind != "strategy" else str(name)

    def options(self) -> LoadOptions:
        """The options as edited; those the strategy doesn't use keep their defaults, so the
        spec line and the results name only what matters. Always valid: every value comes
        from a fixed list. A program's run has none of them: it starts cold."""
        if is_program(self.strategy()):
            return PROGRAM_OPTIONS
        edited = LoadOptions(
            workers=self.workers.value(),
            threads=self.threads.value(),
            chunk=int(self.chunk.currentData()),
            fadvise=self.fadvise.currentText(),
            madvise=self.madvise.currentText(),
            partition=self.partition.currentText(),
            cache=self.cache.currentText(),
            verify=self.verify.isChecked(),
            discard=self.discard.isChecked() or self._discard_forced,
            prefetch=self.prefetch.currentText(),
            readahead=self.readahead.currentData() if self.readahead.isEnabled() else None,
        )
        return effective_options(self.strategy(), edited, self._discard_forced)

    def spec(self) -> str:
        strategy = self.strategy()
        return strategy if is_program(strategy) else spec_text(strategy, self.options())

    def set_config(self, strategy: str, options: LoadOptions) -> None:
        """Draw ``strategy`` and ``options``; ``edited`` follows once, with what they
        became (options the strategy does not use at their defaults)."""
        self._applying = True
        try:
            self._set_config(strategy, options)
        finally:
            self._applying = False
        self._on_change()

    def _set_config(self, strategy: str, options: LoadOptions) -> None:
        if is_program(strategy):
            found = engine_settings(strategy)
            chosen = SideChoice("engine", found[0]) if found is not None else SideChoice("command")
            self.strategy_box.setCurrentIndex(self.choices.index(chosen))
            self.program.set_spec(strategy)
            return
        self.strategy_box.setCurrentText(strategy)
        self.workers.setValue(options.workers)
        self.threads.setValue(options.threads)
        if self.chunk.findData(options.chunk) < 0:  # a size outside the presets (from a config)
            self.chunk.addItem(chunk_text(options.chunk), options.chunk)
        self.chunk.setCurrentIndex(self.chunk.findData(options.chunk))
        for name in ("fadvise", "madvise", "partition", "cache", "prefetch"):
            box: QComboBox = self._knobs[name]  # type: ignore[assignment]
            box.setCurrentText(getattr(options, name))
        self.verify.setChecked(options.verify)
        self.discard.setChecked(options.discard)
        if self.readahead.findData(options.readahead) < 0:
            self.readahead.addItem(readahead_text(options.readahead), options.readahead)
        self.readahead.setCurrentIndex(self.readahead.findData(options.readahead))

    def set_readahead_unavailable(self, reason: str | None) -> None:
        """Why the model's device won't let readahead be set (greys the knob out), or None."""
        self._readahead_unavailable = reason
        self._on_change()

    def require_discard(self, required: bool) -> None:
        """The model doesn't fit in RAM: only discard mode can run, so lock it on."""
        self._discard_forced = required
        self._on_change()

    def set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)

    def _on_change(self) -> None:
        if self._applying:
            return
        kind, engine = self._choice()
        program = kind != "strategy"
        if program and (self.program.kind, self.program.engine) != (kind, engine):
            self.program.choose(kind, engine)  # emits changed: this runs again, once
            return
        self.program.setVisible(program)
        uses = used_options(self.strategy())
        objects = not program and reads_objects(self.strategy())
        self.strategy_box.setToolTip(strategy_summary(self.strategy()) or TIPS["strategy"])
        unused = "a program's run starts from a verified cold cache" if program else None
        for name, widget in self._knobs.items():
            used = name in uses and not (objects and name == "cache")
            tips = OBJECT_TIPS if objects else TIPS
            own = tips.get(name, TIPS[name])
            widget.setEnabled(used)
            tip = own if used or objects else f"{own} (not used by {unused or self.strategy()})"
            widget.setToolTip(tip)
        for name, text in OBJECT_CAPTIONS.items():
            self.captions[name].setText(f"{text if objects else name.capitalize()}:")
            self.captions[name].setToolTip((OBJECT_TIPS if objects else TIPS)[name])
        if program:
            self.cache.setCurrentText("cold")
        elif objects:
            self.cache.setCurrentText("keep")  # nothing of a bucket is cached here to drop
        blocked = readahead_blocked(self.strategy(), self._readahead_unavailable)
        if program:
            blocked = "a program's readahead is set in its spec (readahead=KIB)"

        self.readahead.setEnabled(blocked is None)
        self.readahead.setToolTip(
            TIPS["readahead"] + (f" (not here: {blocked})" if blocked else "")
        )
        if self._discard_forced:
            self.discard.setChecked(True)
            self.discard.setEnabled(False)
            self.discard.setToolTip(
                f"{TIPS['discard']} Locked on: the model doesn't fit in the RAM available."
            )
        strategy = self.strategy()
        spec = strategy if is_program(strategy) else full_spec_text(strategy, self.options())
        line = strategy if is_program(strategy) else summary_text(strategy, self.options())
        self.spec_line.setText(line)
        if line == spec:
            self.spec_line.setToolTip(f"{spec}\n(as the command line's --a and --b take it)")
        else:  # a bucket's, said as connections and part size
            self.spec_line.setToolTip(
                f"{line}\nAs the command line's --a and --b take it: {spec} (threads: the "
                "connections of each worker, chunk: the part size)"
            )
        self.edited.emit(self.strategy(), self.options())
