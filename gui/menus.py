"""The main window's menus: File, Run, View, Help. Each action says what it does (its tip)
and calls the window or the state; which are enabled follows the state (``update``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QTabWidget

from modelmon.gui.export_dialogs import ExportDialogs
from modelmon.gui.exporter import Exporter
from modelmon.gui.settings import AppSettings
from modelmon.gui.state.app_state import AppState
from modelmon.gui.view_menus import HelpMenu, PrimeMenu, SampleMenu, ThemeMenu

Shortcut = QKeySequence.StandardKey | str | None
MEMORY_LIMIT_TEXT = "Memory &limit: none…"
AB_WINNER_TEXT = "Export A/B &winner as configuration…"


@dataclass(frozen=True)
class WindowActions:
    """What the window itself does for a menu: its dialogs and pages."""

    choose_file: Callable[[], None]
    choose_folder: Callable[[], None]
    choose_url: Callable[[], None]
    fill_recent: Callable[[], None]
    watch: Callable[[bool], None]  # process: pick a running process rather than a command
    recommend: Callable[[], None]
    choose_memory_limit: Callable[[], None]
    show_model_tab: Callable[[int], None]
    set_sample_interval: Callable[[float], None]
    quit: Callable[[], None]  # File ▸ Quit: asks first while a job runs


@dataclass(frozen=True)
class MenuParts:
    window: QMainWindow
    state: AppState
    settings: AppSettings
    exports: ExportDialogs
    exporter: Exporter
    plots: tuple[str, ...]  # the plots' names, as Export ▸ plot lists them
    tabs: QTabWidget  # the workspace's, for View's tab entries
    does: WindowActions


class Menus:
    """The window's actions, built on its menu bar."""

    def __init__(self, parts: MenuParts) -> None:
        self.parts = parts
        w = parts.window
        self.files = w.menuBar().addMenu("&File")
        self._file_menu(self.files)
        self.runs = w.menuBar().addMenu("&Run")
        self._run_menu(self.runs)
        self.view = w.menuBar().addMenu("&View")
        self._view_menu(self.view)
        self.help_menu = HelpMenu(w)
        for menu in (self.files, self.runs, self.view):
            menu.setToolTipsVisible(True)
        # Run, measure and watch only with a model open and nothing running.
        self.job_actions = [
            self.run_a_action,
            self.run_b_action,
            self.ab_action,
            self.ceilings_action,
            self.recommend_action,
            self.watch_command_action,
            self.watch_process_action,
        ]
        # Keys no text field may take for editing (shortcuts.KeptShortcuts).
        self.global_actions = [*self.job_actions, self.start_page_action]

    def action(
        self, menu: QMenu, text: str, shortcut: Shortcut, slot: Callable[[], object], tip: str
    ) -> QAction:
        action = QAction(text, self.parts.window)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.setStatusTip(tip)
        action.setToolTip(tip)
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def update(self, ready: bool, running: bool) -> None:
        """``ready``: a model is open; ``running``: a job runs."""
        for action in self.job_actions:
            action.setEnabled(ready and not running)
        self.cancel_action.setEnabled(running)
        self.memory_limit_action.setEnabled(not running)  # it applies to the runs that follow
        exporter = self.parts.exporter
        self.ab_config_action.setEnabled(exporter.can_export_ab)
        # After an A/B without a verdict the winner is an earlier A/B's: the action names it.
        found = exporter.ab_to_export
        earlier = found is not None and found[1] is not exporter.bench.ab.result
        self.ab_config_action.setText(
            AB_WINNER_TEXT.replace("…", f" ({found[0]})…") if earlier and found else AB_WINNER_TEXT
        )
        self.export_recommendation_action.setEnabled(exporter.can_export_recommendation)
        for action in (self.json_action, self.csv_action):
            action.setEnabled(exporter.can_export_results)
        for action in self.plot_actions:
            action.setEnabled(ready)

    def show_memory_limit(self, limit_text: str) -> None:
        """The Run menu says the limit the next runs run under."""
        self.memory_limit_action.setText(
            f"Memory &limit: {limit_text}…" if limit_text else MEMORY_LIMIT_TEXT
        )

    def _file_menu(self, files: QMenu) -> None:
        w, action, does = self.parts, self.action, self.parts.does
        self.open_action = action(
            files,
            "&Open model…",
            QKeySequence.StandardKey.Open,
            does.choose_file,
            "Open a model file or shard index.",
        )
        action(
            files,
            "Open &folder…",
            "Ctrl+Shift+O",
            does.choose_folder,
            "Open the model in a folder (its index, or its one model file).",
        )
        self.url_action = action(
            files,
            "Open &URL…",
            "Ctrl+Shift+U",
            does.choose_url,
            "Open a model in object storage: s3://BUCKET/KEY, a prefix, or https://host/path "
            "(credentials from your AWS configuration).",
        )
        self.recent_menu = files.addMenu("Open &recent")
        self.recent_menu.aboutToShow.connect(does.fill_recent)
        action(
            files,
            "Use &demo model",
            None,
            w.state.use_demo,
            "Open a ~480 MB Llama-shaped demo model (written once to your cache).",
        )
        files.addSeparator()
        self.watch_command_action = action(
            files,
            "Watch a comma&nd…",
            "Ctrl+Shift+W",
            lambda: does.watch(False),
            "Run a command that loads the open model and watch it from outside, plotted "
            "live: what arrived how fast, and what slows it.",
        )
        self.watch_process_action = action(
            files,
            "Watch a proce&ss…",
            None,
            lambda: does.watch(True),
            "Attach to a running process (and its children) and watch it load the open model.",
        )
        files.addSeparator()
        self.export_recommendation_action = action(
            files,
            "&Export recommended configuration…",
            None,
            w.exports.export_recommended,
            "Write the last recommendation's pick (Run ▸ Recommend…), with its evidence, as "
            "a TOML config.",
        )
        self.ab_config_action = action(
            files,
            AB_WINNER_TEXT,
            "Ctrl+Shift+E",
            w.exports.export_ab_config,
            "Write the faster side of the last A/B, with its evidence, as a TOML config.",
        )
        self.json_action = action(
            files,
            "Export results as &JSON…",
            "Ctrl+Shift+J",
            lambda: w.exports.export_results("json"),
            "Write every run (with its metric series), the ceilings and the A/B as JSON.",
        )
        self.csv_action = action(
            files,
            "Export results as &CSV…",
            "Ctrl+Shift+C",
            lambda: w.exports.export_results("csv"),
            "Write the results table, one run a row, as CSV.",
        )
        plots = files.addMenu("Export &plot")
        plots.setToolTipsVisible(True)
        self.plot_actions = [
            action(
                plots,
                f"{name}…",
                None,
                lambda _=False, name=name: w.exports.export_plot(name),
                f"Save the {name.lower()} plot: PNG as it is on screen, SVG or PDF drawn "
                "from the runs' data for print.",
            )
            for name in w.plots
        ]
        files.addSeparator()
        action(
            files,
            "&Quit",
            QKeySequence.StandardKey.Quit,
            w.does.quit,
            "Quit modelmon (asking first while a job runs: quitting stops it).",
        )

    def _run_menu(self, runs: QMenu) -> None:
        w, action, bench = self.parts, self.action, self.parts.state.bench
        self.run_a_action = action(
            runs,
            "Run &A",
            "Ctrl+R",
            lambda: bench.run("A"),
            "Load the model once with configuration A.",
        )
        self.run_b_action = action(
            runs,
            "Run &B",
            "Ctrl+Shift+R",
            lambda: bench.run("B"),
            "Load the model once with configuration B.",
        )
        self.ab_action = action(
            runs,
            "Run A/B × &n",
            "Ctrl+T",
            lambda: bench.run_ab(),
            "Run A, B, A, B … from the same verified cache state and give the verdict.",
        )
        self.ceilings_action = action(
            runs,
            "&Measure ceilings",
            "Ctrl+Shift+M",
            bench.measure_ceilings,
            "Measure what this storage gives on this model.",
        )
        self.recommend_action = action(
            runs,
            "&Recommend…",
            "Ctrl+E",
            w.does.recommend,
            "Search for the fastest configuration within a time budget; File ▸ Export "
            "recommended configuration… then writes it.",
        )
        self.memory_limit_action = action(
            runs,
            MEMORY_LIMIT_TEXT,
            None,
            w.does.choose_memory_limit,
            "Run what follows inside a memory cgroup of a size you choose, as a container's "
            "limit applies: its page cache is charged to it, and a run that needs more is "
            "OOM-killed.",
        )
        self.cancel_action = action(
            runs,
            "&Cancel",
            "Esc",
            bench.cancel,
            "Stop the running job: its workers, or the watched command.",
        )
        runs.addSeparator()
        self.prime_menu = PrimeMenu(runs, w.settings)

    def _view_menu(self, view: QMenu) -> None:
        w, action = self.parts, self.action
        self.start_page_action = action(
            view,
            "&Start page",
            "Ctrl+0",
            lambda: w.state.show_page("start"),
            "Show the models on this machine and the recent ones (the open model stays open).",
        )
        tabs = w.tabs
        for index in range(tabs.count()):
            title = tabs.tabText(index).replace("&&", "&")
            action(
                view,
                tabs.tabText(index),
                f"Ctrl+{index + 1}",
                lambda _=False, index=index: w.does.show_model_tab(index),
                f"Show the {title} tab: {tabs.tabToolTip(index)}",
            )
        view.addSeparator()
        self.theme_menu = ThemeMenu(view, w.settings)
        self.sample_menu = SampleMenu(view, w.settings, w.does.set_sample_interval)
