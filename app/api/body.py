"""Reading request bodies with a size limit (413 beyond it)."""

from __future__ import annotations

from fastapi import Request

from app.errors import PayloadTooLargeError


async def read_limited_body(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLargeError(
            f"request body is {int(declared)} bytes; the limit is {max_bytes} bytes "
            "(GPUCAST_MAX_BODY_BYTES); split the upload or use the CLI"
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLargeError(
                f"request body exceeds the limit of {max_bytes} bytes (GPUCAST_MAX_BODY_BYTES)"
            )
        chunks.append(chunk)
    return b"".join(chunks)
