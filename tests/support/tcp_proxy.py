"""A TCP proxy in front of a real server that a test can black-hole and restore.

``pass``: bytes flow both ways. ``blackhole``: connections stay open and new ones are
accepted, but every byte in either direction is read and dropped, and nothing is ever closed
by the proxy: what a client sees when a firewall or a partitioned network silently drops
packets (the client's kernel still sees its data acknowledged, so only the client's own
deadlines can end its waits). A connection that lost bytes stays black-holed after
``restore()`` (its stream is broken for good, like a flow a NAT forgot); connections opened
after it, and connections that sent nothing meanwhile, pass again.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

_CHUNK = 65536


@dataclass
class _Flow:
    lost: bool = False


class TcpProxy:
    """``with TcpProxy(host, port) as proxy:`` listens on ``127.0.0.1:proxy.port``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.blackholed = False
        self.accepted = 0
        self.dropped_bytes = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop
        ).result(timeout=10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def blackhole(self) -> None:
        self.blackholed = True

    def restore(self) -> None:
        self.blackholed = False

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._writers.add(writer)
        flow = _Flow()
        try:
            if self.blackholed:
                flow.lost = True
                await self._pump(reader, None, flow)
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                return
            self._writers.add(up_writer)
            try:
                await asyncio.gather(
                    self._pump(reader, up_writer, flow), self._pump(up_reader, writer, flow)
                )
            finally:
                up_writer.close()
                self._writers.discard(up_writer)
        finally:
            writer.close()
            self._writers.discard(writer)

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None, flow: _Flow
    ) -> None:
        """Copy until EOF; while black-holed (or once this flow lost bytes) drop instead."""
        try:
            while data := await reader.read(_CHUNK):
                if self.blackholed or flow.lost or writer is None:
                    flow.lost = True
                    self.dropped_bytes += len(data)
                    continue
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if writer is not None:
                writer.close()
