"""What an exported PDF draws, read from its page's content without a PDF library: the
text of each text object, and the paths stroked in a colour.

matplotlib writes the figure's text with its fonts embedded as Type 42 (``pdf.fonttype``):
each character a two-byte code, its Unicode code point, in the strings of ``Tj``/``TJ``.
"""

from __future__ import annotations

import re
import zlib

# A stream's bytes run to "endstream" with the end of line before it: taken whole, since the
# compressed bytes may themselves end in a carriage return or a line feed; the inflater stops
# at the end of its data and leaves the end of line unused.
STREAM = re.compile(rb"stream\r?\n(.*?)endstream", re.S)
TEXT_OBJECT = re.compile(rb"\bBT\b(.*?)\bET\b", re.S)
ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}


def content_streams(data: bytes) -> list[bytes]:
    """Every stream of the file that inflates (the page's content, fonts, images)."""
    found = []
    for match in STREAM.finditer(data):
        inflater = zlib.decompressobj()
        try:
            inflated = inflater.decompress(match.group(1))
        except zlib.error:
            continue
        if inflater.eof:
            found.append(inflated)
    return found


def _strings(operands: bytes) -> list[bytes]:
    """The literal strings "( … )" in ``operands``, unescaped."""
    strings, i = [], 0
    while (start := operands.find(b"(", i)) >= 0:
        out, i, depth = bytearray(), start + 1, 1
        while i < len(operands):
            char = operands[i : i + 1]
            if char == b"\\":
                following = operands[i + 1 : i + 2]
                octal = re.match(rb"[0-7]{1,3}", operands[i + 1 : i + 4])
                if octal:
                    out.append(int(octal.group(), 8) & 0xFF)
                    i += 1 + len(octal.group())
                    continue
                out += ESCAPES.get(following, following)
                i += 2
                continue
            if char == b"(":
                depth += 1
            elif char == b")":
                depth -= 1
                if depth == 0:
                    break
            out += char
            i += 1
        strings.append(bytes(out))
        i += 1
    return strings


def pdf_texts(data: bytes) -> list[str]:
    """The text of each text object the PDF draws, in order."""
    texts = []
    for stream in content_streams(data):
        for block in TEXT_OBJECT.finditer(stream):
            raw = b"".join(_strings(block.group(1)))
            if raw:
                texts.append(raw.decode("utf-16-be", errors="replace"))
    return texts


PAINT = {b"S", b"s", b"B", b"B*", b"b", b"b*"}  # operators that stroke the path built


def _near(colour: tuple[float, ...], wanted: tuple[float, ...]) -> bool:
    return max(abs(a - b) for a, b in zip(colour, wanted, strict=True)) < 0.01


def stroked_paths(data: bytes, hex_colour: str) -> list[int]:
    """The vertices of each path the PDF strokes in ``hex_colour`` (a curve has many, a key's
    sample line two): the page's operators replayed, the stroke colour as ``RG``, ``q`` and
    ``Q`` set it, text objects skipped."""
    wanted = tuple(int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    found = []
    for stream in content_streams(data):
        drawing = TEXT_OBJECT.sub(b" ", stream)
        if not drawing.isascii():  # a font's or an image's bytes, not a page's operators
            continue
        tokens = drawing.split()
        colour: tuple[float, ...] = ()
        saved: list[tuple[float, ...]] = []
        vertices = 0
        for index, token in enumerate(tokens):
            if token == b"RG":
                colour = tuple(float(t) for t in tokens[index - 3 : index])
            elif token == b"q":
                saved.append(colour)
            elif token == b"Q" and saved:
                colour = saved.pop()
            elif token == b"m":
                vertices = 1
            elif token in (b"l", b"c"):
                vertices += 1
            elif token in PAINT:
                if len(colour) == 3 and _near(colour, wanted):
                    found.append(vertices)
                vertices = 0
    return found
