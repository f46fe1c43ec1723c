"""Regenerate the screenshots in this folder from the real window: ``./dev screenshots``
(which runs this under Xvfb). Writes, each in the light and the dark theme (``-dark``):

  start-page.png        the start page listing the models of a fake home (a Hugging Face
                        cache, an Ollama store, an LM Studio folder), at the default size
  ab-run.png            the demo model after the ceilings and an A/B × 3, at the default size
  ab-run-1000x700.png   the same window at 1000 × 700
  recommend.png         after File ▸ Export recommended configuration (a 30 s budget)

Nothing of the user's is read or written: the settings and the fake home live in a
temporary folder; the demo model is the one ``modelmon --demo`` uses (in the cache).
Timings are whatever this machine does. Options: ``--budget S`` for the recommendation,
``--pairs N`` for the A/B.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_SIZE = (1400, 900)
SMALL_SIZE = (1000, 700)
TIMEOUT_S = 900


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    # Qt is imported here, not at the top: spawned workers re-run this script's top level.
    from PySide6.QtCore import QEventLoop, QSettings
    from PySide6.QtWidgets import QApplication

    from modelmon.core import discover_models
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
                suffix = "-dark" if theme == "dark" else ""
                path = HERE / f"{name}{suffix}.png"
                window.grab().save(str(path))
                print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
            window.menus.theme_menu.choose("light")
            window.resize(*DEFAULT_SIZE)

        wait(lambda: window.start_page.discovery is not None, "discovery")
        save("start-page")

        workspace = window.workspace
        window.state.use_demo()
        wait(lambda: workspace.bench.info is not None, "the demo model")
        workspace.bench.measure_ceilings()
        wait(lambda: not workspace.bench.running, "the ceilings")
        workspace.compare.pairs.setValue(args.pairs)
        workspace.bench.run_ab(args.pairs)
        wait(lambda: not workspace.bench.running, "the A/B")
        save("ab-run")
        save("ab-run-1000x700", SMALL_SIZE)

        workspace.bench.recommend(args.budget, str(Path(scratch) / "recommended.toml"))
        wait(lambda: not workspace.bench.running, "the recommendation")
        save("recommend")

        for record in workspace.bench.records:
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
