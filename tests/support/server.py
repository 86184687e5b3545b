"""A real gpucast server on a loopback port, run by uvicorn in a background thread."""

from __future__ import annotations

import threading
import time

import uvicorn

from app.api import create_app
from app.settings import Settings
from tests.support.pg_cluster import free_port


class LiveServer:
    """``with LiveServer(settings) as base_url:`` serves ``create_app(settings)`` until exit."""

    def __init__(self, settings: Settings) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(settings),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("gpucast server did not start")
            time.sleep(0.05)
        return self.base_url

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
