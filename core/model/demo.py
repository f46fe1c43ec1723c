"""The demo models: generated once into the user's cache directory, reused afterwards."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from modelmon.core.errors import OptionsError
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.model.synth_gguf import write_gguf_model


class DemoShape(TypedDict):
    layers: int
    hidden: int
    vocab: int


# A small Llama-shaped model: 16 layers, hidden 1024. ~480 MB of fp16 in two shards, and the
# same shape as a ~250 MB Q8_0 GGUF. Big enough to show I/O behaviour, quick to generate.
DEMO_SHAPE: DemoShape = {"layers": 16, "hidden": 1024, "vocab": 16000}
RECIPE = {"version": 1, "shape": DEMO_SHAPE, "safetensors": "F16x2", "gguf": "Q8_0"}
SAFETENSORS_DIR = "llama-demo-f16"
GGUF_FILE = "llama-demo-q8_0.gguf"
STAMP = "recipe.json"
DEMO_ENTRIES = (SAFETENSORS_DIR, GGUF_FILE, STAMP)  # all the demo ever writes in its folder


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "modelmon" / "demo"


def demo_models(
    folder: Path | None = None, progress: Callable[[str], None] | None = None
) -> dict[str, Path]:
    """{"safetensors": index path, "gguf": file path}, generating them if missing or stale.

    ``folder`` may already hold the user's own files: only the demo's own entries (the names
    in ``DEMO_ENTRIES``) are ever written or replaced, and those only when ``recipe.json``
    says a previous demo made them. Anything else in the way is refused, never deleted.
    """
    root = Path(folder) if folder is not None else cache_dir()
    paths = {
        "safetensors": root / SAFETENSORS_DIR / "model.safetensors.index.json",
        "gguf": root / GGUF_FILE,
    }
    if root.exists() and not root.is_dir():
        raise OptionsError(f"{root}: exists and is not a folder; name a folder for the demo models")
    stamp = root / STAMP
    ours = _read_recipe(stamp)
    if ours == RECIPE and all(p.exists() for p in paths.values()):
        return paths
    in_the_way = [root / name for name in DEMO_ENTRIES if (root / name).exists()]
    if in_the_way and ours is None:
        raise OptionsError(
            f"{in_the_way[0]}: already exists and was not made by modelmon demo; "
            "choose another folder (nothing was changed)"
        )
    root.mkdir(parents=True, exist_ok=True)
    # Build in our own scratch folder inside ``root`` and move the finished entries into
    # place: an interrupted run leaves no half model, and no folder of the user's is removed.
    scratch = Path(tempfile.mkdtemp(prefix=".demo-", suffix=".partial", dir=root))
    try:
        if progress:
            progress("writing the demo safetensors model (~480 MB, fp16, 2 shards)")
        write_safetensors_model(scratch / SAFETENSORS_DIR, dtype="F16", shards=2, **DEMO_SHAPE)
        if progress:
            progress("writing the demo GGUF model (~250 MB, Q8_0)")
        write_gguf_model(scratch / GGUF_FILE, tensor_type="Q8_0", **DEMO_SHAPE)
        stamp.unlink(missing_ok=True)  # from here on the entries are not a complete demo
        for name in (SAFETENSORS_DIR, GGUF_FILE):
            old = root / name
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)  # a previous demo's, as recipe.json said
            elif old.exists() or old.is_symlink():
                old.unlink()
            (scratch / name).rename(old)
        (scratch / STAMP).write_text(json.dumps(RECIPE))
        (scratch / STAMP).rename(stamp)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return paths


def _read_recipe(stamp: Path) -> object:
    """The recipe a previous demo left, or None when there is none (or it is not ours)."""
    try:
        if not stamp.is_file() or stamp.stat().st_size > 4096:
            return None
        return json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
