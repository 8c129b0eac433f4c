"""Local ``redis-server`` processes for tests, benchmarks and the demo: each on a free port
of 127.0.0.1 in its own directory, stopped by pid. Nothing here touches a server it did not
start.

>>> LocalRedis.available() in (True, False)
True
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from regimetune.models import ConfigError

CLUSTER_SLOTS = 16384
#: A cluster node also listens on its port + 10,000 (the cluster bus), so its port is at most this.
MAX_CLUSTER_PORT = 65535 - 10000


def free_port(*, cluster: bool = False) -> int:
    """A port free on 127.0.0.1 now (the usual race applies; the start retries on failure);
    for a cluster node, one at most :data:`MAX_CLUSTER_PORT` whose bus port is free too (the
    kernel's ephemeral ports run up to 60999, which Redis refuses in cluster mode)."""
    if not cluster:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    rng = random.Random()
    for _ in range(200):
        port = rng.randint(20000, MAX_CLUSTER_PORT)
        if _bindable(port) and _bindable(port + 10000):
            return port
    raise ConfigError("no free port pair for a Redis Cluster node on 127.0.0.1")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class LocalRedis:
    """One ``redis-server`` process: no persistence, bound to 127.0.0.1."""

    def __init__(self, root: Path, *, cluster: bool = False, config: Sequence[str] = ()) -> None:
        self.root = root
        self.cluster = cluster
        self.config = tuple(config)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available() -> bool:
        return shutil.which("redis-server") is not None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> LocalRedis:
        if not self.available():
            raise ConfigError("redis-server is not installed")
        for _ in range(5):
            self.port = free_port(cluster=self.cluster)
            workdir = self.root / str(self.port)
            workdir.mkdir(parents=True, exist_ok=True)
            cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", str(workdir), "--daemonize", "no",
                   "--logfile", str(workdir / "redis.log")]  # fmt: skip
            if self.cluster:
                cmd += ["--cluster-enabled", "yes", "--cluster-config-file", str(workdir / "nodes.conf")]
            for item in self.config:
                name, _, value = item.partition(" ")
                cmd += [f"--{name}", value]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_ready(timeout):
                return self
            self.stop()
            log = workdir / "redis.log"
            why = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        raise ConfigError(f"redis-server did not start in {self.root}: {why[0] if why else 'no log'}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def client(self, **kwargs: Any) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None


class LocalCluster:
    """``masters`` cluster nodes holding contiguous slot ranges, plus ``spares`` empty
    cluster-enabled nodes (not members) to commission. A context manager: leaving it stops
    every process it started and removes its directory."""

    def __init__(self, masters: int, *, spares: int = 0, config: Sequence[str] = ()) -> None:
        if masters < 1:
            raise ConfigError("a local cluster needs at least one master")
        self.root = Path(tempfile.mkdtemp(prefix="regimetune-redis-"))
        self.masters = [LocalRedis(self.root, cluster=True, config=config) for _ in range(masters)]
        self.spares = [LocalRedis(self.root, cluster=True, config=config) for _ in range(spares)]

    @property
    def nodes(self) -> list[LocalRedis]:
        return self.masters + self.spares

    @property
    def address(self) -> str:
        return self.masters[0].address

    def start(self, timeout: float = 20.0) -> LocalCluster:
        try:
            for node in self.nodes:
                node.start()
            per = CLUSTER_SLOTS // len(self.masters)
            for k, node in enumerate(self.masters):
                last = CLUSTER_SLOTS - 1 if k == len(self.masters) - 1 else (k + 1) * per - 1
                with node.client() as c:
                    c.execute_command("CLUSTER", "ADDSLOTSRANGE", k * per, last)
            with self.masters[0].client() as c:
                for node in self.masters[1:]:
                    c.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
            self._wait_ok(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ok(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        n = len(self.masters)
        while time.monotonic() < deadline:
            ok = True
            for node in self.masters:
                with node.client(decode_responses=True) as c:
                    info = c.execute_command("CLUSTER", "INFO")
                if "cluster_state:ok" not in info or f"cluster_known_nodes:{n}\r" not in info:
                    ok = False
                    break
            if ok:
                return
            time.sleep(0.05)
        raise ConfigError(f"the local cluster did not converge in {timeout:.0f} s")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        if os.path.isdir(self.root):
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


__all__ = ["CLUSTER_SLOTS", "LocalCluster", "LocalRedis", "free_port"]
