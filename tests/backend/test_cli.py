"""``regimetune backend`` refuses bad settings with one line and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "regimetune.cli.main", "backend", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--state", "{dir}", "--port", "0"), "cannot open backend state"),
    ],
)
def test_bad_settings_exit_2_with_one_line(tmp_path: Path, args: tuple[str, ...], reason: str) -> None:
    r = run(*(a.format(dir=tmp_path) for a in args))
    assert r.returncode == 2, r.stderr
    text = " ".join(r.stderr.split())  # rich wraps the one message at the terminal width
    assert text.startswith("error:") and reason in text and "Traceback" not in r.stderr


def test_env_prefix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from regimetune.backend import load_settings
    from regimetune.models import ConfigError

    monkeypatch.setenv("REGIMETUNE_BACKEND_PORT", "9123")
    monkeypatch.setenv("REGIMETUNE_BACKEND_STATE", str(tmp_path / "env.db"))
    settings = load_settings(host=None)
    assert settings.port == 9123 and settings.state == tmp_path / "env.db"
    assert load_settings(port=9000).port == 9000  # the command line wins
    monkeypatch.setenv("REGIMETUNE_BACKEND_NET_BANDWIDTH", "-5")
    with pytest.raises(ConfigError, match="net_bandwidth"):
        load_settings()


@pytest.mark.parametrize(("key", "value"), [("port", 70000), ("model", "quantum"), ("capacity", 0)])
def test_bad_settings_are_config_errors(key: str, value: object) -> None:
    from regimetune.backend import load_settings
    from regimetune.models import ConfigError

    with pytest.raises(ConfigError, match=key):
        load_settings(**{key: value})
