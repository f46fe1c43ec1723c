"""Regenerate the screenshots in this folder from the real window: ``./dev screenshots``
(which runs this under Xvfb). Writes, each in the light and the dark theme (``-dark``):

  start-page.png        the start page listing the models of a fake home (a Hugging Face
                        cache, an Ollama store, an LM Studio folder), at the default size
  ab-run.png            the demo model after the ceilings and an A/B × 3, at the default size
  ab-run-1000x700.png   the same window at 1000 × 700
  ab-run-800x500.png    the same window at 800 × 500, the smallest it gets
  recommend.png         after Run ▸ Recommend… (a 30 s budget) with your loader, the
                        command below: it leads the ranking
  recommend-ranks.png   after Run ▸ Recommend… for 4 ranks under a 1 GiB memory limit: the
                        ways they can load, every rank's whole copy refused
  watch.png             after File ▸ Watch a command…: ``python load.py {path}``, a small
                        program reading the demo model's shards with os.read, watched from
                        a verified cold cache
  ab-command.png        an A/B × 3 of modelmon's default (A) against that same command as
                        configuration B ("Your command…"), each of its runs watched
  cold-start.png        the Cold start tab after File ▸ Watch a command… of a small server
                        (tests/serve_bed.py) whose 4 ranks each read the whole demo model:
                        the ranks' lanes, the phases and ready
  cold-start-ab.png     the Cold start tab after an A/B × 1 of two commands of that server,
                        B's reads paced to 30 MB/s, ready when its "ready" line is printed:
                        both cold starts on one axis, the ready row under the A/B's controls

and, through File ▸ Export plot, the A/B's throughput as a figure (throughput.svg).

Before each picture it checks what a user would see: every Run button, the Cancel button and
the A/B button whole and in sight, and each plot as tall as it needs (no caption over its
time axis); a picture that shows otherwise fails the script.

Nothing of the user's is read or written: the settings and the fake home live in a
temporary folder; the demo model is the one ``modelmon --demo`` uses (in the cache).
Timings are whatever this machine does. Options: ``--budget S`` for the recommendation,
``--pairs N`` for the A/B, ``--only watch ab-command`` (or other names) for those alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_SIZE = (1400, 900)
SMALL_SIZE = (1000, 700)
SMALLEST_SIZE = (800, 500)  # the window's minimum size
TIMEOUT_S = 900
NAMES = (
    "start-page",
    "ab-run",
    "recommend",
    "recommend-ranks",
    "watch",
    "ab-command",
    "cold-start",
    "cold-start-ab",
)
# The server of the cold-start picture: imports, 4 ranks reading the whole model, a
# post-processing step, then it listens (what ends the watch).
SERVER_COMMAND = (
    f"python {ROOT / 'tests' / 'serve_bed.py'} {{path}} --ranks 4 --mode whole "
    "--import-s 1.5 --post-s 1.5 --pace-mbps 150"
)
# The two servers of the A/B picture: one rank, the same but its reads paced; ready when it
# says so on its standard error.
AB_SERVER = f"python {ROOT / 'tests' / 'serve_bed.py'} {{path}} --import-s 1 --post-s 1 --pace-mbps"
AB_READY_LINE = "serve_bed: ready"
# The user's loader in the pictures, as a user would type it: ``python load.py {path}``, run
# in a folder holding load.py (the scratch folder's ``loader``).
LOADER_COMMAND = "python load.py {path}"
# load.py: every shard of the model whose path it is given, read front to back with
# os.read in 4 MiB calls (as a --no-mmap loader does).
LOAD_PY = """
import glob, os, sys
folder = sys.argv[1] if os.path.isdir(sys.argv[1]) else os.path.dirname(sys.argv[1])
for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
    fd = os.open(path, os.O_RDONLY)
    while os.read(fd, 4 << 20):
        pass
    os.close(fd)
"""


def fake_home(root: Path) -> dict[str, str]:
    """A home with models where people keep them; the environment that points at it."""
    sys.path.insert(0, str(ROOT))
    from modelmon.core import write_gguf_model, write_safetensors_model
    from tests.conftest import HUB_COMMITS, add_hub_repo, add_ollama_model

    home, staged = root / "home", root / "staged"
    hub = home / ".cache" / "huggingface" / "hub"
    ollama = home / ".ollama" / "models"
    llama = {"layers": 4, "hidden": 512, "vocab": 4096}
    write_safetensors_model(staged / "sharded", dtype="F16", shards=2, seed=5, **llama)
    write_gguf_model(staged / "quants" / "tiny-Q8_0.gguf", tensor_type="Q8_0", seed=6, **llama)
    write_gguf_model(staged / "quants" / "tiny-F16.gguf", tensor_type="F16", seed=6, **llama)
    for repo, folder in (("acme/tiny-llama", "sharded"), ("acme/tiny-llama-GGUF", "quants")):
        add_hub_repo(hub, repo, HUB_COMMITS[repo], staged / folder)
    pulled = write_gguf_model(staged / "tinyllama.gguf", tensor_type="Q8_0", seed=7, **llama)
    add_ollama_model(ollama, "tinyllama", "latest", pulled)
    write_gguf_model(
        home / ".lmstudio" / "models" / "acme" / "tiny-GGUF" / "tiny-Q8_0.gguf",
        tensor_type="Q8_0",
        seed=8,
        **llama,
    )
    return {"HOME": str(home), "HF_HUB_CACHE": str(hub), "OLLAMA_MODELS": str(ollama)}


def layout_problems(window: Any) -> list[str]:
    """What a user would find cut off at this size: controls not wholly in sight, plots of
    the tab shown shorter than they need."""
    workspace = window.workspace
    if window.pages.currentWidget() is not workspace:
        return []
    problems = []
    controls = [panel.run_button for panel in workspace.panels.values()]
    controls += [workspace.progress.cancel_button, workspace.compare.ab_button]
    for control in controls:
        if control.visibleRegion().boundingRect() != control.rect():
            problems.append(f"{control.text()!r} not wholly in sight")
    for name, plot in workspace.plots.items():
        if plot.isVisible() and name != "Blocks" and plot.height() < plot.minimumHeight():
            problems.append(f"the {name} plot {plot.height()} px tall of {plot.minimumHeight()}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=NAMES, help="make these pictures alone")
    args = parser.parse_args()
    wanted = set(args.only) if args.only else set(NAMES)
    # Qt is imported here, not at the top: spawned workers re-run this script's top level.
    from PySide6.QtCore import QEventLoop, QSettings
    from PySide6.QtWidgets import QApplication

    from modelmon.core import discover_models
    from modelmon.core.configuration import command_spec
    from modelmon.gui.app import create_application, show_unexpected_errors
    from modelmon.gui.main_window import MainWindow

    app = create_application()
    started = time.monotonic()

    def wait(ready: Callable[[], bool], what: str) -> None:
        while not ready():
            if time.monotonic() - started > TIMEOUT_S:
                raise TimeoutError(f"timed out waiting for {what}")
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
            time.sleep(0.02)

    def settle(seconds: float = 0.8) -> None:
        """Let layouts and plots repaint before a grab."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
            time.sleep(0.02)

    with tempfile.TemporaryDirectory(prefix="modelmon-screenshots-") as scratch:
        environ = fake_home(Path(scratch))
        # The loader's folder is the working directory, and ``python`` is this Python: the
        # command reads as a user types it.
        loader = Path(scratch) / "loader"
        loader.mkdir()
        (loader / "load.py").write_text(LOAD_PY.lstrip())
        # multiprocessing notes the starting folder on import, and spawned workers find this
        # script from there: imported before the folder changes.
        import multiprocessing.process  # noqa: F401

        os.chdir(loader)
        os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
        settings = QSettings(str(Path(scratch) / "settings.ini"), QSettings.Format.IniFormat)
        window = MainWindow(settings=settings, discover=lambda: discover_models(environ=environ))
        show_unexpected_errors(window)
        window.resize(*DEFAULT_SIZE)
        window.show()

        def save(name: str, size: tuple[int, int] = DEFAULT_SIZE) -> None:
            window.resize(*size)
            for theme in ("light", "dark"):
                window.menus.theme_menu.choose(theme)
                settle()
                problems = layout_problems(window)
                if problems:
                    raise SystemExit(f"{name} at {size[0]}×{size[1]}: " + "; ".join(problems))
                suffix = "-dark" if theme == "dark" else ""
                path = HERE / f"{name}{suffix}.png"
                window.grab().save(str(path))
                print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
            window.menus.theme_menu.choose("light")
            window.resize(*DEFAULT_SIZE)

        wait(lambda: window.start_page.discovery is not None, "discovery")
        if "start-page" in wanted:
            save("start-page")

        workspace, bench = window.workspace, window.bench
        window.state.use_demo()
        wait(lambda: bench.info is not None, "the demo model")
        if wanted & {"ab-run", "recommend"}:
            bench.measure_ceilings()
            wait(lambda: not bench.running, "the ceilings")
        if "ab-run" in wanted:
            bench.run_ab(args.pairs)
            wait(lambda: not bench.running, "the A/B")
            save("ab-run")
            save("ab-run-1000x700", SMALL_SIZE)
            save("ab-run-800x500", SMALLEST_SIZE)
            figure = HERE / "throughput.svg"
            done: list[tuple[bool, str]] = []
            workspace.exporter.finished.connect(lambda ok, text: done.append((ok, text)))
            workspace.exporter.export_plot("Throughput", str(figure))
            wait(lambda: bool(done), "the figure")
            if not done[0][0]:
                raise SystemExit(f"exporting the figure failed: {done[0][1]}")
            print(f"wrote {figure.relative_to(ROOT)}", file=sys.stderr)
        if "recommend" in wanted:
            bench.recommend(args.budget, command_spec(LOADER_COMMAND))
            wait(lambda: not bench.running, "the recommendation")
            save("recommend")
        if "recommend-ranks" in wanted:
            assert bench.set_memory_limit("1Gi") is None
            bench.recommend(args.budget, None, 4)
            wait(lambda: not bench.running, "the ranks recommendation")
            save("recommend-ranks")
            bench.set_memory_limit("")
        if "watch" in wanted:
            from modelmon.gui.state.watch_job import WatchInput, watch_request

            given = WatchInput(LOADER_COMMAND, None, "", "cold", None)
            assert bench.info is not None
            bench.watch(watch_request(given, bench.info.model))
            wait(lambda: not bench.running, "the watch")
            workspace.tabs.setCurrentIndex(0)
            save("watch")
        if "ab-command" in wanted:
            from modelmon.core.options import LoadOptions

            bench.configs.set("B", command_spec(LOADER_COMMAND), LoadOptions())
            bench.run_ab(args.pairs)
            wait(lambda: not bench.running, "the A/B with a command")
            workspace.tabs.setCurrentIndex(0)
            save("ab-command")

        if "cold-start" in wanted:
            from modelmon.gui.state.watch_job import WatchInput, watch_request

            given = WatchInput(SERVER_COMMAND, None, "", "cold", None)
            assert bench.info is not None
            bench.watch(watch_request(given, bench.info.model))
            wait(lambda: not bench.running, "the server's watch")
            tabs = workspace.tabs
            tabs.setCurrentIndex(
                next(i for i in range(tabs.count()) if tabs.tabText(i) == "Cold start")
            )
            save("cold-start")

        if "cold-start-ab" in wanted:
            from modelmon.core.options import LoadOptions

            for side, pace in (("A", 150), ("B", 30)):
                bench.configs.set(side, command_spec(f"{AB_SERVER} {pace}"), LoadOptions())
            bench.ready.set("line", AB_READY_LINE)
            bench.run_ab(1)
            wait(lambda: not bench.running, "the servers' A/B")
            tabs = workspace.tabs
            tabs.setCurrentIndex(
                next(i for i in range(tabs.count()) if tabs.tabText(i) == "Cold start")
            )
            save("cold-start-ab")

        for record in bench.records:
            result = record.result
            print(
                record.run_name,
                record.spec,
                record.status,
                f"{result.mbps:.0f} MB/s" if result else "",
                file=sys.stderr,
            )
        print(workspace.compare.verdict.text(), file=sys.stderr)
        print(window.messages.message(), file=sys.stderr)
        window.close()
    QApplication.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
