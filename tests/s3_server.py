"""A real S3-compatible server on the loopback address for the tests: moto's
server mode in a process of its own (not a mock inside the client), started
and stopped by the tests. ``storage_options`` is what s3fs needs to reach it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any

KEY = SECRET = "nncodecs-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Server:
    """``with S3Server() as s3:`` a moto server; ``s3.storage_options``, ``s3.bucket(name)``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> S3Server:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + "/moto-api/", timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError("the moto S3 server did not start") from None
                time.sleep(0.1)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None

    @property
    def storage_options(self) -> dict[str, Any]:
        return {
            "endpoint_url": self.url,
            "key": KEY,
            "secret": SECRET,
            "client_kwargs": {"region_name": "eu-west-1"},
        }

    def bucket(self, name: str) -> str:
        """Create a bucket; its URL."""
        import s3fs

        fs = s3fs.S3FileSystem(**self.storage_options, skip_instance_cache=True)
        fs.mkdir(name)
        return f"s3://{name}"
