"""Images for the model, checked by their headers before any decode: one function for every
path an image takes (MCP results, Python tool results, figures).

- ``image_info(raw) -> (mime, width, height) | None``: the type and size read from the first
  bytes of a PNG, GIF, JPEG or WebP (the JPEG walk reads segment headers only); None for
  anything else, a truncated header included.
- ``image_size(raw, mime)``: the size when ``raw`` is a ``mime`` image.
- ``prepare_image(b64, mime, pixel_budget) -> (base64, mime, note) | str``: the image as it
  may be sent, or a placeholder saying why not. An image that is not what it claims, or whose
  header names more than ``MAX_DECODE_PIXELS`` pixels, is refused before Pillow sees it: a
  140 KB PNG can declare 12,000 x 12,000 pixels, and decoding it costs 1.3 GB and seconds of
  the kernel. Under that cap an image over ``pixel_budget`` is downscaled (Pillow, optional);
  GIF and WebP are sent as PNG then.
"""

from __future__ import annotations

import base64
import binascii
import io
import struct

__all__ = ["MAX_DECODE_PIXELS", "image_info", "image_size", "prepare_image"]

# 24 megapixels: a 6000 x 4000 camera photo decodes, a decompression bomb does not
MAX_DECODE_PIXELS = 24_000_000
_MAX_SIDE = 1 << 16

_JPEG_SOF = frozenset((0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF))


def _decode(b64: str | bytes) -> bytes | None:
    if isinstance(b64, str):
        b64 = "".join(b64.split()).encode("ascii", "replace")
    try:
        return base64.b64decode(b64, validate=True) or None
    except (binascii.Error, ValueError):
        return None


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(raw):
        if raw[i] != 0xFF:
            return None
        marker = raw[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        length = struct.unpack(">H", raw[i + 2:i + 4])[0]
        if length < 2:
            return None
        if marker in _JPEG_SOF:
            height, width = struct.unpack(">HH", raw[i + 5:i + 9])
            return width, height
        i += 2 + length
    return None


def _webp_size(raw: bytes) -> tuple[int, int] | None:
    kind = raw[12:16]
    if kind == b"VP8 " and raw[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", raw[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if kind == b"VP8L" and raw[20:21] == b"\x2f":
        bits = int.from_bytes(raw[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if kind == b"VP8X" and len(raw) >= 30:
        return int.from_bytes(raw[24:27], "little") + 1, int.from_bytes(raw[27:30], "little") + 1
    return None


def image_info(raw: bytes) -> tuple[str, int, int] | None:
    """(mime, width, height) from the header alone (module doc)."""
    try:
        if raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR":
            mime, (width, height) = "image/png", struct.unpack(">II", raw[16:24])
        elif raw[:6] in (b"GIF87a", b"GIF89a"):
            mime, (width, height) = "image/gif", struct.unpack("<HH", raw[6:10])
        elif raw[:3] == b"\xff\xd8\xff":
            size = _jpeg_size(raw)
            if size is None:
                return None
            mime, (width, height) = "image/jpeg", size
        elif raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
            size = _webp_size(raw)
            if size is None:
                return None
            mime, (width, height) = "image/webp", size
        else:
            return None
    except struct.error:  # a header cut short
        return None
    if not (0 < width < _MAX_SIDE * 16 and 0 < height < _MAX_SIDE * 16):
        return None
    return mime, width, height


def image_size(raw: bytes, mime: str) -> tuple[int, int] | None:
    """(width, height) when ``raw`` is a ``mime`` image, from its header."""
    info = image_info(raw)
    return (info[1], info[2]) if info is not None and info[0] == mime else None


def prepare_image(b64: str | bytes, mime: str, pixel_budget: int) -> tuple[str, str, str] | str:
    """``(base64, mime, note)`` ready for an ImageContent, or a placeholder (module doc)."""
    raw = _decode(b64)
    info = image_info(raw) if raw is not None else None
    if raw is None or info is None or info[0] != mime:  # the model would reject it
        return f"[not a valid {mime} image; not shown]"
    width, height = info[1], info[2]
    label = f"{width}x{height}"
    if width * height > MAX_DECODE_PIXELS:
        return (f"[{mime} image {label} omitted: over the {MAX_DECODE_PIXELS:,} pixels an image may have "
                "to be decoded]")
    if pixel_budget <= 0 or width * height <= pixel_budget:
        data = b64 if isinstance(b64, str) else b64.decode("ascii")
        return "".join(data.split()), mime, label
    try:
        from PIL import Image  # optional
    except ImportError:
        return f"[{mime} image {label} omitted: over the pixel budget and Pillow is not installed]"
    out_mime = "image/jpeg" if mime == "image/jpeg" else "image/png"
    try:
        with Image.open(io.BytesIO(raw)) as img:
            if (img.width, img.height) != (width, height):
                return f"[not a valid {mime} image; not shown]"
            scale = (pixel_budget / (width * height)) ** 0.5
            new = (max(1, int(width * scale)), max(1, int(height * scale)))
            if mime == "image/jpeg":
                img.draft("RGB", new)  # decode at a reduced scale where the codec can
            small = img.convert("RGB" if out_mime == "image/jpeg" else "RGBA").resize(new)
            out = io.BytesIO()
            small.save(out, format="JPEG" if out_mime == "image/jpeg" else "PNG")
    except Exception as exc:  # a broken image must not break the tool result
        return f"[{mime} image {label} could not be resized: {type(exc).__name__}]"
    note = f"{label} downscaled to {new[0]}x{new[1]}"
    return base64.b64encode(out.getvalue()).decode("ascii"), out_mime, note
