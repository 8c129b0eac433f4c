"""What an operator's disk does to the service, done for real: the store on a tmpfs that fills
up and is freed, and on an ext4 file system that fails (shut down without flushing, as at a
power cut) and is mounted again; the service and the reference backend are real processes.
Linux as root only (mount); elsewhere these tests skip."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from regimetune.cli.demo import free_port, stop
from regimetune.client.ingest import WindowCounts, encode_counts

from .conftest import TOKEN
from .test_processes import applied, backend_versions, start_backend, start_service, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("mount") is None,
        reason="mounts a tmpfs and an ext4 loop device: Linux as root",
    ),
]
EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2  # drop what is not on the disk yet: a power cut


@contextlib.contextmanager
def mounted(where: Path, *args: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", *args, str(where)], capture_output=True, text=True)
    if res.returncode:
        pytest.skip(f"cannot mount here: {res.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(directory: Path) -> Path:
    """Write a file until the file system is full; returns it (delete it to free the space)."""
    path = directory / "filler"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    return path


def send(base: str, wc: WindowCounts, seen: dict[int, int], *, until: float = 60.0) -> dict[str, Any]:
    """One window as one batch under its Idempotency-Key, sent again after each 503 (as a
    daemon does); every status is counted in ``seen``; a 503 must say why and when to retry."""
    end = time.monotonic() + until
    while time.monotonic() < end:
        r = httpx.post(
            f"{base}/v1/ingest/counts",
            params={"window_start": repr(wc.start)},
            content=encode_counts(wc.keys, wc.reads, wc.writes),
            headers={
                "Content-Type": "application/x-regimetune-counts",
                "Authorization": f"Bearer {TOKEN}",
                "Idempotency-Key": f"w{wc.start!r}",
            },
            timeout=30.0,
        )
        seen[r.status_code] = seen.get(r.status_code, 0) + 1
        if r.status_code == 200:
            return dict(r.json())
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"].isdigit() and "store cannot" in r.json()["detail"]
        time.sleep(0.2)
    raise AssertionError(f"window at {wc.start} was never acknowledged")


def on(tmp: Path, disk: Path, port: int, bport: int) -> Any:
    """The service with its store on ``disk`` (its log in ``tmp``), pushing to ``bport``."""
    return start_service(
        tmp, port, backend_port=bport, env={"REGIMETUNE_STORE__URL": f"sqlite:///{disk / 'rt.db'}"}
    )


def history(base: str) -> dict[str, Any]:
    """Every window committed, the regime segments and the decisions, as the API serves them."""
    applied(base)
    wait_until(lambda: httpx.get(f"{base}/readyz").status_code == 200)  # no window owed
    windows = httpx.get(f"{base}/v1/windows", params={"limit": 10000}).json()
    segments = httpx.get(f"{base}/v1/regimes", params={"limit": 1000}).json()["items"]
    decisions = httpx.get(f"{base}/v1/decisions", params={"limit": 1000}).json()["items"]
    return {
        "windows": windows,
        "segments": segments,
        "decisions": [(d["regime_from"], d["regime_to"], d["inputs"].get("window")) for d in decisions],
    }


def delivered_everything(base: str, bport: int) -> None:
    """Wait until nothing is pending, then: the backend received each version once, in order,
    and holds what GET /v1/policy serves; nothing was refused."""
    wait_until(lambda: not httpx.get(f"{base}/v1/policy/status").json()["pending"], timeout=60.0)
    got = backend_versions(bport)
    versions = [v for v, _ in got]
    assert versions == sorted(set(versions)), got
    assert all(dup == 0 for _, dup in got), got  # each delivered once
    status = httpx.get(f"{base}/v1/policy/status").json()
    assert status["refused"] == [] and status["last_error"] is None, status
    ours = httpx.get(f"{base}/v1/policy").json()
    theirs = httpx.get(
        f"http://127.0.0.1:{bport}/v1/policy", headers={"Authorization": "Bearer backend-token-for-tests"}
    ).json()
    assert ours == theirs and status["delivered_version"] == ours["version"]


def reference_history(tmp: Path, workload: list[WindowCounts]) -> dict[str, Any]:
    """The same run on a healthy disk, uninterrupted."""
    tmp.mkdir()
    port = free_port()
    svc = start_service(tmp, port)
    try:
        base = f"http://127.0.0.1:{port}"
        seen: dict[int, int] = {}
        for wc in workload:
            send(base, wc, seen)
        return history(base)
    finally:
        stop(svc)


def test_disk_full_then_freed_loses_no_acknowledged_window(tmp_path, workload) -> None:
    ref = reference_history(tmp_path / "ref", workload)
    bport, sport = free_port(), free_port()
    backend = start_backend(tmp_path, bport)
    base = f"http://127.0.0.1:{sport}"
    seen: dict[int, int] = {}
    unready: list[dict[str, Any]] = []
    with mounted(tmp_path / "disk", "-t", "tmpfs", "-o", "size=16m", "tmpfs") as disk:
        service = on(tmp_path, disk, sport, bport)
        try:
            for wc in workload[:50]:
                send(base, wc, seen)
            wait_until(lambda: len(backend_versions(bport)) >= 1)
            filler = fill(disk)
            i = 50
            while seen.get(503, 0) < 3 and i < len(workload) - 20:  # until the store refuses
                try:
                    send(base, workload[i], seen, until=2.0)
                except AssertionError:
                    r = httpx.get(f"{base}/readyz")
                    unready.append({"code": r.status_code, **r.json()})
                    break
                i += 1
            r = httpx.get(f"{base}/readyz")
            unready.append({"code": r.status_code, **r.json()})
            filler.unlink()  # the operator frees space
            for wc in workload[i:]:
                send(base, wc, seen)
            got = history(base)
            delivered_everything(base, bport)
            os.kill(service.pid, signal.SIGKILL)
            service.wait(10)
            service = on(tmp_path, disk, sport, bport)
            after_restart = history(base)
            delivered_everything(base, bport)
        finally:
            stop(service)
            stop(backend)
    assert seen.get(503, 0) >= 1, seen  # the disk was full: refused, and said so
    assert set(seen) <= {200, 503}, seen  # never a 500
    assert any(u["code"] == 503 and "store" in u["detail"] for u in unready), unready
    assert got == ref  # 0 acknowledged windows lost, the same regimes and decisions
    assert after_restart == ref


def shut_down(fs: Path) -> None:
    """The file system fails: what is not on the disk yet is gone, every I/O errors."""
    fd = os.open(fs, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
    finally:
        os.close(fd)


def test_file_system_failure_under_defaults_loses_no_acknowledged_batch(tmp_path, workload) -> None:
    image = tmp_path / "disk.img"
    with image.open("wb") as f:
        f.truncate(64 << 20)
    if subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True).returncode:
        pytest.skip("no mkfs.ext4")
    bport, sport = free_port(), free_port()
    backend = start_backend(tmp_path, bport)
    base = f"http://127.0.0.1:{sport}"
    disk = tmp_path / "disk"
    seen: dict[int, int] = {}
    service = None
    try:
        with mounted(disk, "-o", "loop", str(image)):
            service = on(tmp_path, disk, sport, bport)
            acked = [send(base, wc, seen) for wc in workload[:70]]
            wait_until(lambda: len(backend_versions(bport)) >= 2)
            before = [v for v, _ in backend_versions(bport)]
            shut_down(disk)
            r = httpx.post(
                f"{base}/v1/ingest/counts",
                params={"window_start": repr(workload[70].start)},
                content=encode_counts(workload[70].keys, workload[70].reads, workload[70].writes),
                headers={
                    "Content-Type": "application/x-regimetune-counts",
                    "Authorization": f"Bearer {TOKEN}",
                },
            )
            assert r.status_code == 503 and "Retry-After" in r.headers, r.text
            ready = httpx.get(f"{base}/readyz")
            assert ready.status_code == 503 and "store" in ready.json()["detail"], ready.text
            os.kill(service.pid, signal.SIGKILL)  # the machine goes down with its disk
            service.wait(10)
        with mounted(disk, "-o", "loop", str(image)):  # back up: the journal is replayed
            service = on(tmp_path, disk, sport, bport)
            again = [send(base, wc, seen) for wc in workload[:70]]
            # every acknowledged batch is in the store: sent again, each is a duplicate of itself
            assert [(a["seq"], a["duplicate"]) for a in again] == [(a["seq"], True) for a in acked]
            for wc in workload[70:]:
                send(base, wc, seen)
            applied(base)
            delivered_everything(base, bport)
            after = [v for v, _ in backend_versions(bport)]
            assert after[: len(before)] == before and len(after) > len(before)  # no number reused
            stop(service)
    finally:
        stop(service)
        stop(backend)
