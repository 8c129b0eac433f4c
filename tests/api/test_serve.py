"""``regimetune serve``: how it starts uvicorn (uvicorn.run is replaced: no server starts)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

from regimetune.cli.main import app

from .conftest import TOKEN, TestClient


@pytest.fixture
def ran(monkeypatch, tmp_path) -> Iterator[dict[str, Any]]:
    seen: dict[str, Any] = {}

    def fake_run(asgi: Any, **kw: Any) -> None:
        seen.update(kw, fast_path=asgi.policy_fast_path, switch_interval=sys.getswitchinterval())
        with TestClient(asgi):  # startup and shutdown: the engine thread stops, the store closes
            pass

    monkeypatch.setattr(uvicorn, "run", fake_run)
    monkeypatch.setenv("REGIMETUNE_STORE__URL", f"sqlite:///{tmp_path / 'rt.db'}")
    monkeypatch.setenv("REGIMETUNE_AUTH__WRITE_TOKENS", json.dumps([TOKEN]))
    before = sys.getswitchinterval()
    yield seen
    sys.setswitchinterval(before)


def test_serve_picks_the_fastest_loop_and_parser_installed(ran) -> None:
    res = CliRunner().invoke(app, ["serve", "--port", "0"])
    assert res.exit_code == 0, res.output
    assert ran["loop"] == "auto" and ran["http"] == "auto"
    assert ran["access_log"] is False  # log level warning: no line per request
    assert ran["switch_interval"] == pytest.approx(0.001)
    assert ran["fast_path"] is not None


def test_serve_options_reach_uvicorn(ran) -> None:
    args = ["serve", "--port", "0", "--loop", "asyncio", "--http", "h11", "--log-level", "info"]
    res = CliRunner().invoke(app, [*args, "--switch-interval-ms", "5"])
    assert res.exit_code == 0, res.output
    assert (ran["loop"], ran["http"], ran["access_log"]) == ("asyncio", "h11", True)
    assert ran["switch_interval"] == pytest.approx(0.005)


def test_serve_refuses_an_unknown_loop(ran) -> None:
    res = CliRunner().invoke(app, ["serve", "--port", "0", "--loop", "trio"])
    assert res.exit_code == 2 and "--loop" in res.output
    assert not ran


def test_serve_with_a_store_url_that_is_not_one_prints_one_line(tmp_path) -> None:
    # issue 13, finding 8: a traceback (make_url raised again inside the error message)
    import os
    import subprocess
    from pathlib import Path

    import regimetune

    src = str(Path(regimetune.__file__).parents[1])  # this checkout, whatever the cwd
    env = {
        **os.environ,
        "PYTHONPATH": src,
        "REGIMETUNE_AUTH__WRITE_TOKENS": json.dumps([TOKEN]),
        "COLUMNS": "60",
    }
    res = subprocess.run(
        [sys.executable, "-m", "regimetune.cli.main", "serve", "--store-url", "notaurl", "--port", "0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "store.url" in lines[0] and "not a database URL" in lines[0], res.stderr


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"REGIMETUNE_AUTH__WRITE_TOKENS": "s3cret"}, "REGIMETUNE_AUTH__WRITE_TOKENS"),
        ({"REGIMETUNE_ENGINE__DETECTOR": "min_regime_s=300"}, "REGIMETUNE_ENGINE__DETECTOR"),
        ({"REGIMETUNE_FOO": "1"}, "REGIMETUNE_FOO"),
        ({"REGIMETUNE_STORE_URL": "sqlite://"}, "REGIMETUNE_STORE_URL"),  # one '_' where '__' goes
        ({"REGIMETUNE_STORE__URL": "mysql://db/regimetune"}, "driver is not installed"),
        ({"REGIMETUNE_STORE__URL": "postgresql+psycopg://u:pw@127.0.0.1:1/db"}, "store.url"),
        ({"REGIMETUNE_STORE__URL": "sqlite:////no/such/dir/rt.db"}, "store.url"),
        ({"REGIMETUNE_PUSH__BACKEND": "reference", "REGIMETUNE_PUSH__URL": "backend:8081"}, "push.url"),
        (
            {
                "REGIMETUNE_PUSH__BACKEND": "rest",
                "REGIMETUNE_PUSH__URL": "http://ops:pw@backend/v1/policy",
                "REGIMETUNE_PUSH__TOKEN": "t0ken",
            },
            "push.token",
        ),
    ],
)
def test_every_bad_setting_exits_2_with_one_line_naming_it(monkeypatch, capsys, tmp_path, env, names) -> None:
    from regimetune.cli.main import main

    monkeypatch.setenv("REGIMETUNE_AUTH__WRITE_TOKENS", json.dumps([TOKEN]))
    monkeypatch.setenv("REGIMETUNE_STORE__URL", f"sqlite:///{tmp_path / 'rt.db'}")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("the service started"))
    monkeypatch.setattr(sys, "argv", ["regimetune", "serve", "--port", "0"])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2
    assert len(err.splitlines()) == 1 and names in err and "Traceback" not in err, err
    assert "pw@" not in err and "s3cret" not in err


def test_every_setting_and_the_other_tools_variables_pass_the_environment_check() -> None:
    from regimetune.api.settings import check_environment

    check_environment(
        {
            "REGIMETUNE_STORE__SQLITE_SYNCHRONOUS": "FULL",
            "REGIMETUNE_ENGINE__DETECTOR__MAX_REGIMES": "3",  # a parameter of the detector
            "REGIMETUNE_PUSH__HEADERS__X_API_KEY": "k",  # any key of a table
            "REGIMETUNE_POLICY_FILE": "policy.json",
            "REGIMETUNE_CONFIG": "rt.toml",
            "REGIMETUNE_BACKEND_TOKEN": "t",  # the reference backend's
            "REGIMETUNE_REPLAY_TOKEN": "t",
            "OTHER": "x",
        }
    )
