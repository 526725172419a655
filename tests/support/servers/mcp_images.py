"""A FastMCP server whose tools return images, for Ferry's image tests (over stdio).

    python mcp_images.py

`PNG` is a real 1×1 PNG; the tests import it to know the exact bytes each tool sends.
"""

from __future__ import annotations

import base64
import struct
import zlib

from mcp.server.fastmcp import FastMCP
from mcp.types import ImageContent, TextContent, ToolAnnotations

READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)


def png(width: int, height: int) -> bytes:
    """A valid grey PNG of the given size (no dependency needed to make one)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 0))


PNG = png(1, 1)
PNG_BASE64 = base64.b64encode(PNG).decode()


def _image(data: bytes, mime: str = "image/png") -> ImageContent:
    return ImageContent(type="image", data=base64.b64encode(data).decode(), mimeType=mime)


def build() -> FastMCP:
    server = FastMCP("images", log_level="WARNING")

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def chart() -> list[TextContent | ImageContent]:
        """Draw this month's sales chart."""
        return [TextContent(type="text", text="Sales, March: flat."), _image(PNG)]

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def screenshot(width: int, height: int) -> list[ImageContent]:
        """A screenshot of the given size in pixels, and nothing else."""
        return [_image(png(width, height))]

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def odd_images() -> list[TextContent | ImageContent]:
        """Images a provider would refuse: another format, data that is not base64."""
        broken = ImageContent(type="image", data="not base64!", mimeType="image/png")
        svg = _image(b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml")
        return [TextContent(type="text", text="Two odd ones."), svg, broken, _image(PNG)]

    return server


if __name__ == "__main__":
    build().run(transport="stdio")
