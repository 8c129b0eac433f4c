"""Fixtures of the backend tests: an in-process app (TestClient) and a real process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from regimetune.backend import create_app, load_settings

with warnings.catch_warnings():
    # starlette 1.x deprecates httpx in its TestClient; the client still works.
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


@pytest.fixture
def make_client(tmp_path: Path) -> Callable[..., TestClient]:
    """A TestClient over a fresh app; the same ``name`` reopens the same state file."""

    def make(name: str = "b", **settings: object) -> TestClient:
        state = tmp_path / f"{name}.db"
        return TestClient(create_app(load_settings(state=state, **settings)))

    return make


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BackendProcess:
    """``regimetune backend`` in a subprocess on 127.0.0.1; ``kill`` and ``start`` again
    keep the same port and state file."""

    def __init__(self, state: Path, *, args: tuple[str, ...] = ()) -> None:
        self.state = state
        self.port = free_port()
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        cmd = [
            sys.executable, "-m", "regimetune.backend",
            "--port", str(self.port), "--state", str(self.state), *self.args,
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("REGIMETUNE_BACKEND_")}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"backend exited with {self.proc.returncode}: {err}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError("backend did not come up")

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, as a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        self.proc = None


@pytest.fixture
def backend_process(tmp_path: Path) -> Iterator[BackendProcess]:
    bp = BackendProcess(tmp_path / "backend.db", args=("--servers", "4", "--buckets", "32", "--seed", "3"))
    bp.start()
    try:
        yield bp
    finally:
        bp.kill()
