"""Schemathesis over the whole API of a real service (uvicorn on 127.0.0.1), with a valid write
token so writes are exercised and not only refused with 401: its default checks (but positive_data_acceptance, see below), every phase
(examples, coverage, fuzzing, stateful links), on SQLite and on PostgreSQL. No answer may be a
5xx, and the service must still be healthy afterwards.

The time budget per store is ``REGIMETUNE_FUZZ_SECONDS`` (default 20 s, so ``make test`` stays
short); the acceptance run of issue 13 is ``REGIMETUNE_FUZZ_SECONDS=300``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from regimetune.cli.demo import free_port, spawn, stop, wait_ready

from .conftest import TOKEN
from .test_store import PG_URL, _pg_reachable

pytestmark = pytest.mark.slow
SECONDS = int(os.environ.get("REGIMETUNE_FUZZ_SECONDS", "20"))
HOOKS = "_schemathesis_hooks"  # beside this file: the compact ingest body is sent as raw bytes


def _schemathesis() -> str:
    exe = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or shutil.which("schemathesis")
    if exe is None:
        pytest.skip("the schemathesis command is not installed")
    return exe


@pytest.fixture(params=["sqlite", "postgres"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real service on a fresh store, logging every request (uvicorn's access log at level
    info); yields its base URL and the directory of its log."""
    env = {
        "REGIMETUNE_STORE__URL": f"sqlite:///{tmp_path / 'service.db'}",
        "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([TOKEN]),
        "REGIMETUNE_ENGINE__WINDOW_S": "60",
        "REGIMETUNE_ENGINE__N_BUCKETS": "64",
        "REGIMETUNE_TUNING__UPLOAD_DIR": str(tmp_path / "uploads"),
        "REGIMETUNE_TUNING__BUDGET": "4",  # jobs the fuzzer starts stay cheap on 2 cores
        "REGIMETUNE_ENGINE__MODE": "auto",
    }
    schema = None
    if request.param == "postgres":
        if not _pg_reachable():
            pytest.skip("PostgreSQL at 127.0.0.1:5432 is unreachable")
        schema = f"rt_fuzz_{uuid.uuid4().hex[:10]}"
        env |= {"REGIMETUNE_STORE__URL": PG_URL, "REGIMETUNE_STORE__SCHEMA_NAME": schema}
    port, log = free_port(), tmp_path / "service.log"
    proc = spawn(["serve", "--host", "127.0.0.1", "--port", str(port), "--log-level", "info"], env, log)
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz", proc, log)
        yield f"http://127.0.0.1:{port}", tmp_path
    finally:
        stop(proc)
        if schema is not None:
            eng = sa.create_engine(PG_URL)
            with eng.begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            eng.dispose()


_ACCESS = re.compile(r'"([A-Z]+) (\S+) HTTP/[\d.]+" (\d{3})')


def _access_log(log: str) -> tuple[int, list[str]]:
    """(requests the service answered, the 5xx ones) from uvicorn's access log."""
    answered = _ACCESS.findall(log)
    return len(answered), [" ".join(a) for a in answered if a[2].startswith("5")]


def _failed_checks(ndjson: Path) -> Counter[str]:
    """Failed checks by name, from schemathesis' NDJSON event stream."""
    failed = Counter[str]()
    for line in ndjson.read_text().splitlines():
        recorder = json.loads(line).get("ScenarioFinished", {}).get("recorder", {})
        for checks in recorder.get("checks", {}).values():
            failed.update(c["name"] for c in checks if c["status"] == "failure")
    return failed


def test_no_server_error_under_schemathesis(service: tuple[str, Path]) -> None:
    base, tmp = service
    report = tmp / "report"
    cmd = [
        _schemathesis(),
        "run",
        f"{base}/openapi.json",
        *("--header", f"Authorization: Bearer {TOKEN}"),
        *("--phases", "examples,coverage,fuzzing,stateful"),
        *("--max-time", str(SECONDS)),
        # the schema cannot say that parallel arrays have equal lengths (nor FastAPI's 400 on
        # malformed JSON): positive_data_acceptance failed at once on every ingest operation and
        # the fuzzer then kept shrinking that one case; the other default checks all run
        *("--exclude-checks", "positive_data_acceptance", "--continue-on-failure"),
        *("--workers", "1", "--request-timeout", "30", "--suppress-health-check", "all"),
        *("--report", "ndjson", "--report-dir", str(report), "--no-color"),
    ]
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": HOOKS,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path]),
    }
    ran = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=SECONDS * 3 + 300)
    summary = ran.stdout[-6000:]
    ndjson = next(report.glob("*.ndjson"), None)
    assert ndjson is not None, summary + ran.stderr[-2000:]
    failed = _failed_checks(ndjson)
    log = (tmp / "service.log").read_text(errors="replace")
    requests, errors = _access_log(log)
    writes = sum(1 for m in _ACCESS.finditer(log) if m[1] in {"POST", "PUT"} and m[3].startswith("2"))
    print(f"\n{base}: {requests} requests ({writes} writes accepted) in {SECONDS} s, {len(errors)} 5xx")
    print(f"failed checks other than not_a_server_error (reported, not asserted): {dict(failed)}")
    assert requests > 10 * SECONDS and writes > SECONDS, summary  # the run really exercised the API
    assert not errors, "\n".join(errors[:20])
    assert not failed["not_a_server_error"], summary
    assert httpx.get(f"{base}/readyz", timeout=10).status_code == 200
    assert "Traceback" not in log, log[log.find("Traceback") :][:3000]
