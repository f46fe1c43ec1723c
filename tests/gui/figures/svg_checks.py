"""What every exported SVG must be, whoever renders it: valid XML without NaN or infinite
coordinates, drawn the same by cairosvg and librsvg."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from xml.dom import minidom

import numpy as np
import pytest

NOT_A_NUMBER = re.compile(r"(?i)\b(nan|inf|infinity)\b")


def check_svg(data: bytes) -> None:
    """Valid XML whose root is <svg>, no attribute holding NaN or infinity (path data,
    coordinates, transforms)."""
    document = minidom.parseString(data)
    assert document.documentElement.tagName == "svg"
    for element in document.getElementsByTagName("*"):
        for name, value in element.attributes.items():
            assert not NOT_A_NUMBER.search(value), (element.tagName, name, value[:200])


def pixels(png: bytes) -> np.ndarray:
    """A PNG as an RGB float array (0–255), alpha composited over white."""
    from matplotlib.image import imread

    image = imread(io.BytesIO(png), format="png").astype(np.float64)
    if image.max() <= 1.0:
        image = image * 255.0
    if image.shape[2] == 4:
        alpha = image[:, :, 3:4] / 255.0
        image = image[:, :, :3] * alpha + 255.0 * (1.0 - alpha)
    return image[:, :, :3]


def cairosvg_png(data: bytes, width: int) -> np.ndarray:
    try:
        import cairosvg
    except OSError as exc:  # the package is there, libcairo is not
        pytest.skip(f"cairosvg cannot load libcairo: {exc}")
    return pixels(cairosvg.svg2png(bytestring=data, output_width=width))


def rsvg_png(data: bytes, width: int) -> np.ndarray | None:
    """librsvg's rendering; None where rsvg-convert is not installed."""
    tool = shutil.which("rsvg-convert")
    if tool is None:
        return None
    done = subprocess.run(
        [tool, "--width", str(width), "--keep-aspect-ratio", "--format", "png"],
        input=data,
        capture_output=True,
        check=True,
    )
    return pixels(done.stdout)


def crop(image: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    """The part of ``image`` in ``box``: (left, top, width, height) as fractions of it."""
    height, width = image.shape[:2]
    left, top, w, h = box
    x0, y0 = round(left * width), round(top * height)
    return image[y0 : y0 + round(h * height), x0 : x0 + round(w * width)]


def bluish(region: np.ndarray) -> np.ndarray:
    """Pixels of run A's blue, full or faded (its line, its fill, blended under B's)."""
    return region[:, :, 2] - region[:, :, 0] > 30


def saturated(region: np.ndarray) -> np.ndarray:
    """Coloured ink (data), not the greys of grid lines, text and backgrounds."""
    return region.max(axis=2) - region.min(axis=2) > 60


def column_tops(mask: np.ndarray) -> np.ndarray:
    """How high the marked pixels reach in each column (0 bottom .. 1 top; 0 if none)."""
    height = mask.shape[0]
    rows = np.where(mask.any(axis=0), mask.argmax(axis=0), height)
    return 1.0 - rows / height


def curve_tops(mask: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How high the marked pixels reach (0 bottom .. 1 top; 0 if none) at ``at``: positions
    across the region as fractions of its width (the pixel columns either side count too)."""
    tops, width = column_tops(mask), mask.shape[1]
    columns = np.clip(np.round(at * width).astype(int), 1, width - 2)
    return np.array([float(tops[c - 1 : c + 2].max()) for c in columns])


def curve_top_spans(
    mask: np.ndarray, at: np.ndarray, reach: float
) -> tuple[np.ndarray, np.ndarray]:
    """The lowest and highest the marked pixels reach (as ``curve_tops``) over the columns
    within ``reach`` (a fraction of the width) of each position in ``at``."""
    tops, width = column_tops(mask), mask.shape[1]
    half = max(1, round(reach * width))
    columns = np.clip(np.round(at * width).astype(int), half, width - 1 - half)
    spans = [tops[c - half : c + half + 1] for c in columns]
    return np.array([s.min() for s in spans]), np.array([s.max() for s in spans])


def occupancy(mask: np.ndarray, shape: tuple[int, int] = (10, 16)) -> np.ndarray:
    """Which cells of a coarse grid over the region hold any marked pixel."""
    cells = np.zeros(shape, dtype=bool)
    for r, band in enumerate(np.array_split(mask, shape[0], axis=0)):
        for c, cell in enumerate(np.array_split(band, shape[1], axis=1)):
            cells[r, c] = cell.any()
    return cells
