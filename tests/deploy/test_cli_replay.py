"""``regimetune replay``: pacing on the trace's clock, the key split between daemons, and
several daemons in lock step delivering every key of every window once (JSON or binary),
resends recognised, refusals and unreachable services reported in one line."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import typer.main
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from regimetune.api import create_app, load_settings
from regimetune.cli.demo import free_port, spawn, stop, wait_ready
from regimetune.cli.main import app
from regimetune.cli.replay import Replayer, paced, split
from regimetune.client.ingest import IngestClient, WindowCounts, count_windows
from regimetune.collectors import GeneratorConfig, generate, write_events
from regimetune.models import ConfigError, EventBatch, InputError

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TOKEN = "replay-token"
CFG = GeneratorConfig(duration_s=1800, workers=16, seed=3)


@pytest.fixture(scope="module")
def windows() -> list[WindowCounts]:
    return list(count_windows(generate(CFG), 60.0))


@pytest.fixture
def service(tmp_path: Path) -> Iterator[TestClient]:
    settings = load_settings(
        store={"url": f"sqlite:///{tmp_path / 'rt.db'}"},
        auth={"write_tokens": [TOKEN]},
        engine={"window_s": 60.0},
        ingest={"apply": "sync"},
    )
    with TestClient(create_app(settings)) as c:
        yield c


def counter(c: TestClient, name: str) -> float:
    for fam in text_string_to_metric_families(c.get("/metrics").text):
        for s in fam.samples:
            if s.name == name:
                return float(s.value)
    raise KeyError(name)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def _wc(start: float, n: int = 3) -> WindowCounts:
    keys = np.arange(n, dtype=np.uint64)
    return WindowCounts(start, 10.0, keys, np.ones(n, np.uint32), np.zeros(n, np.uint32))


def test_paced_sends_each_window_when_it_closes_on_the_scaled_clock() -> None:
    fc = FakeClock()
    ws = [_wc(s) for s in (1000.0, 1010.0, 1020.0, 1050.0)]
    sent = []
    for wc in paced(ws, speed=10.0, clock=fc.clock, sleep=fc.sleep):
        sent.append((wc.start, fc.now))
        fc.now += 0.5  # sending takes wall time, which the schedule absorbs
    # window [1000, 1010) closes 10 trace seconds after the start: 1 s at 10x; the gap is kept
    assert sent == [(1000.0, 101.0), (1010.0, 102.0), (1020.0, 103.0), (1050.0, 106.0)]


def test_paced_without_speed_never_sleeps() -> None:
    fc = FakeClock()
    assert len(list(paced([_wc(0), _wc(10)], speed=None, clock=fc.clock, sleep=fc.sleep))) == 2
    assert fc.sleeps == []


def test_split_gives_each_key_to_one_daemon(windows: list[WindowCounts]) -> None:
    wc = max(windows, key=lambda w: len(w.keys))
    parts = split(wc, 3)
    assert sum(len(p.keys) for p in parts) == len(wc.keys)
    assert sorted(np.concatenate([p.keys for p in parts]).tolist()) == sorted(wc.keys.tolist())
    for i, p in enumerate(parts):
        assert np.all(p.keys % 3 == i)
        assert p.requests == int(wc.reads[wc.keys % 3 == i].sum() + wc.writes[wc.keys % 3 == i].sum())
    assert sum(p.requests for p in parts) == wc.requests


@pytest.mark.parametrize(("binary", "daemons", "chunk"), [(True, 3, 0), (False, 2, 50)])
def test_daemons_deliver_every_key_once(
    service: TestClient, windows: list[WindowCounts], binary: bool, daemons: int, chunk: int
) -> None:
    clients = [
        IngestClient("http://testserver", token=TOKEN, binary=binary, client=service) for _ in range(daemons)
    ]
    with Replayer(clients, run_id="t", chunk=chunk) as rep:
        for wc in windows:
            rep.send(wc)
        stats = rep.stats()
    keys = sum(len(w.keys) for w in windows)
    assert stats.windows == len(windows) and stats.keys == keys and stats.duplicates == 0
    assert stats.requests == sum(w.requests for w in windows)
    assert stats.batches > len(windows)  # several daemons (and chunks) per window
    assert counter(service, "regimetune_ingest_keys_total") == keys
    assert counter(service, "regimetune_ingest_batches_total") == stats.batches
    # every window but the last ones, still open for late batches (the allowed lateness), was
    # closed and counted
    lateness = service.app.state.engine.settings.ingest.allowed_lateness_windows
    assert service.get("/v1/engine").json()["windows"] == len(windows) - 1 - lateness

    # a restarted replay with the same run id is recognised batch by batch
    with Replayer(
        [
            IngestClient("http://testserver", token=TOKEN, binary=binary, client=service)
            for _ in range(daemons)
        ],
        run_id="t",
        chunk=chunk,
    ) as rep:
        for wc in windows:
            rep.send(wc)
        again = rep.stats()
    assert again.duplicates == again.batches == stats.batches
    assert counter(service, "regimetune_ingest_keys_total") == keys


def test_a_refusal_names_the_window_and_the_reason(service: TestClient, windows: list[WindowCounts]) -> None:
    with (
        Replayer([IngestClient("http://testserver", token="wrong", client=service)]) as rep,
        pytest.raises(InputError, match=r"refused the batch of window 0: 403 .*token"),
    ):
        rep.send(windows[0])


def test_an_unreachable_service_fails_after_the_retries() -> None:
    with (
        Replayer(
            [IngestClient("http://127.0.0.1:9", token=TOKEN, timeout=0.5)], retries=1, backoff_s=0.01
        ) as rep,
        pytest.raises(ConfigError, match="after 2 attempts"),
    ):
        rep.send(_wc(0))


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    def fails(*args: str) -> str:
        r = CliRunner().invoke(app, ["replay", *args])
        assert r.exit_code == 2, r.output
        assert r.output.startswith("error: ") and r.output.count("\n") == 1, r.output
        return r.output

    assert "no such trace file" in fails(str(tmp_path / "none.csv"), "--url", "http://127.0.0.1:9")
    trace = tmp_path / "t.csv"
    write_events(generate(GeneratorConfig(duration_s=120, workers=4, seed=0)), trace)
    assert "not ready" in fails(str(trace), "--url", "http://127.0.0.1:9", "--wait", "0")
    # --format is the trace's format, as in every command; the request body is --body
    assert "--body json" in fails(str(trace), "--url", "http://x", "--format", "json")
    r = CliRunner().invoke(app, ["replay", str(trace), "--url", "http://x", "--body", "xml"])
    assert r.exit_code == 2 and "--body" in r.output


def test_help_documents_the_options() -> None:
    r = CliRunner().invoke(app, ["replay", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    for opt in ("--url", "--speed", "--fast", "--body", "--daemons", "--token", "REGIMETUNE_REPLAY_TOKEN"):
        assert opt in r.output
    # the trace options are detect's, by the same definitions
    detect = {p.name: p for p in typer.main.get_command(app).commands["detect"].params}  # type: ignore[attr-defined]
    replay = {p.name: p for p in typer.main.get_command(app).commands["replay"].params}  # type: ignore[attr-defined]
    for name in ("fmt", "columns", "read_op", "write_op", "time_unit", "skip_bad", "delimiter", "no_header"):
        assert replay[name].opts == detect[name].opts and replay[name].help == detect[name].help


@pytest.fixture(scope="module")
def live_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The service as a real process on 127.0.0.1 (replay speaks HTTP to a URL)."""
    tmp = tmp_path_factory.mktemp("live")
    port = free_port()
    env = {
        "REGIMETUNE_STORE__URL": f"sqlite:///{tmp / 'service.db'}",
        "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([TOKEN]),
    }
    proc = spawn(["serve", "--host", "127.0.0.1", "--port", str(port)], env, tmp / "service.log")
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz", proc, tmp / "service.log")
    except ConfigError as exc:
        stop(proc)
        pytest.skip(f"the service did not start: {exc}")
    yield f"http://127.0.0.1:{port}"
    stop(proc)


def _parsplice_csv(path: Path, cfg: GeneratorConfig) -> int:
    """A generated run written as real ParSplice traces are: ``ts,op,dbid,key`` without a
    header, ops DBMemoryGet / DBMemoryPut, keys spread over 64 bits; returns the number of
    requests."""
    batch = EventBatch.concat(list(generate(cfg)))
    ops = np.where(batch.op == 0, "DBMemoryGet", "DBMemoryPut")
    keys = batch.key * np.uint64(0x9E3779B97F4A7C15)  # a bijection on 64-bit keys (wraps)
    path.write_text("".join(f"{t:.3f},{o},0,{k}\n" for t, o, k in zip(batch.ts, ops, keys, strict=True)))
    return len(batch)


def test_replay_takes_detects_column_options(live_service: str, tmp_path: Path) -> None:
    trace = tmp_path / "kv.csv"
    n = _parsplice_csv(trace, GeneratorConfig(duration_s=600, workers=4, seed=5))
    base = ["replay", str(trace), "--url", live_service, "--token", TOKEN, "--fast", "--json"]
    # without the op names, the first record says what is wrong and what fixes it
    r = CliRunner().invoke(app, [*base, "--columns", "ts,op,-,key"])
    assert r.exit_code == 2
    assert (
        f"{trace}:1: unknown op 'DBMemoryPut'" in r.output
        or f"{trace}:1: unknown op 'DBMemoryGet'" in r.output
    )
    assert "--read-op" in r.output and "--write-op" in r.output
    ops = ["--read-op", "DBMemoryGet", "--write-op", "DBMemoryPut"]
    r = CliRunner().invoke(app, [*base, "--columns", "ts,op,-,key", *ops, "--run-id", "kv"])
    assert r.exit_code == 0, r.output
    stats = json.loads(r.output.strip().splitlines()[-1])
    assert stats["requests"] == n and stats["windows"] == 61  # 10-s windows, the service's default
    # columns swapped: the key read as the time stops the replay at the first line, readably
    r = CliRunner().invoke(app, [*base, "--columns", "key,op,-,ts", *ops, "--run-id", "swapped"])
    assert r.exit_code == 2
    assert f"{trace}:1: timestamp" in r.output and "--columns" in r.output and "np." not in r.output


@pytest.mark.shared_data
def test_replay_a_real_parsplice_trace(live_service: str, shared_data: Path) -> None:
    trace = shared_data / "parsplice" / "scale-workers-1M-1-71684.kv.csv.gz"
    r = CliRunner().invoke(
        app,
        ["replay", str(trace), "--url", live_service, "--token", TOKEN, "--fast", "--json", "--windows", "20",
         "--columns", "ts,op,-,key", "--read-op", "DBMemoryGet", "--write-op", "DBMemoryPut", "--run-id", "real"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    stats = json.loads(r.output.strip().splitlines()[-1])
    assert stats["windows"] == 20 and stats["requests"] > 0 and stats["duplicates"] == 0
