"""Everything docker-compose.yml and the Dockerfile name exists: commands (parsed by the real
CLI), REGIMETUNE_* variables (real settings, valid values), ports (each URL points at a
service listening there), and paths (mounted repo files, paths under volumes)."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import click
import pytest
import yaml
from pydantic import BaseModel

from regimetune.api.settings import Settings
from regimetune.backend.settings import BackendSettings
from regimetune.models import ConfigError

from .conftest import ROOT, compose, dockerfile, exec_form, option, parse, regimetune_command

SERVICES = compose()["services"]
OURS = {n: s for n, s in SERVICES.items() if s.get("image") == "regimetune:latest"}
# ports the third-party images listen on (their documented defaults)
IMAGE_PORTS = {"postgres": {5432}, "prometheus": {9090}, "grafana": {3000}}
DASK = importlib.util.find_spec("distributed") is not None


def _docker(instr: str) -> str:
    """The final stage's instruction (the last one of that name)."""
    return [a for i, a in dockerfile() if i == instr][-1]


def argv(service: dict[str, Any]) -> list[str]:
    """What the container runs: its entry point (the image's unless overridden) and command."""
    entry = service.get("entrypoint", exec_form(_docker("ENTRYPOINT")))
    cmd = service.get("command", exec_form(_docker("CMD")))
    return [*entry, *cmd]


def _settings_paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    out = set()
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out |= _settings_paths(ann, f"{prefix}{name}__")
        out.add(f"{prefix}{name}")
    return out


SERVICE_VARS = {f"REGIMETUNE_{p.upper()}" for p in _settings_paths(Settings)} | {"REGIMETUNE_CONFIG"}
BACKEND_VARS = {f"REGIMETUNE_BACKEND_{n.upper()}" for n in BackendSettings.model_fields}


def _click_vars(cmd: Any) -> set[str]:
    out: set[str] = set()
    for p in cmd.params:
        env = getattr(p, "envvar", None)
        out |= {env} if isinstance(env, str) else set(env or ())
    return out


def _dask_command(sub: str) -> Any:
    cmd = importlib.import_module(f"distributed.cli.dask_{sub}").main
    assert isinstance(cmd, click.Command)
    return cmd


# -- commands -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(OURS))
def test_each_command_is_a_real_cli_command(name: str) -> None:
    args = argv(OURS[name])
    if args[0] == "regimetune":
        cmd = regimetune_command(args[1])
        parse(cmd, args[2:], f"regimetune {args[1]}")
        from typer.testing import CliRunner

        from regimetune.cli.main import app

        r = CliRunner().invoke(app, [args[1], "--help"])
        assert r.exit_code == 0, r.output
        return
    assert args[0] == "dask", args
    if not DASK:
        pytest.skip("distributed is not installed")
    parse(_dask_command(args[1]), args[2:], f"dask {args[1]}")
    r = subprocess.run(
        [str(Path(sys.executable).with_name("dask")), args[1], "--help"], capture_output=True, timeout=120
    )
    assert r.returncode == 0, r.stderr


def test_dockerfile_entry_point_and_command() -> None:
    entry = exec_form(_docker("ENTRYPOINT"))
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert entry == ["regimetune"] and "regimetune" in scripts
    cmd = exec_form(_docker("CMD"))
    parse(regimetune_command(cmd[0]), cmd[1:], f"regimetune {cmd[0]}")
    # the healthcheck asks /readyz on the port the default command serves
    health = _docker("HEALTHCHECK")
    port = option(cmd, "--port")
    assert f"http://127.0.0.1:{port}/readyz" in health
    assert _docker("EXPOSE") == port
    # not root
    assert _docker("USER") not in ("root", "0")
    # what it copies exists, and the extra it installs is declared
    for instr, args in dockerfile():
        if instr == "COPY" and not args.startswith("--from"):
            for src in exec_form(args)[:-1]:
                assert (ROOT / src).exists(), src
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    installed = re.search(r'pip install "\.\[(\w+)\]"', _docker("RUN") + " ".join(a for _, a in dockerfile()))
    assert installed and installed.group(1) in extras
    assert any(r.startswith("psycopg") for r in extras[installed.group(1)])
    assert any(r.startswith("distributed") for r in extras[installed.group(1)])


# -- environment ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(n for n, s in SERVICES.items() if s.get("environment")))
def test_each_regimetune_variable_is_a_real_setting(name: str) -> None:
    env = SERVICES[name]["environment"]
    ours = {k for k in env if k.startswith("REGIMETUNE_")}
    if not ours:
        return
    args = argv(SERVICES[name])
    sub = args[1]
    if sub in ("serve", "migrate"):
        known = SERVICE_VARS
    elif sub == "backend":
        known = BACKEND_VARS
    else:
        known = _click_vars(regimetune_command(sub))
    assert ours <= known, f"{name}: not settings of 'regimetune {sub}': {sorted(ours - known)}"


def _service_settings(monkeypatch: pytest.MonkeyPatch, name: str, *, drop: tuple[str, ...] = ()) -> Any:
    from regimetune.api import load_settings

    for k, v in SERVICES[name]["environment"].items():
        if k not in drop:
            monkeypatch.setenv(k, str(v))
    config = option(SERVICES[name]["command"], "--config")
    return load_settings(_host_path(name, config) if config else None)


def _host_path(service: str, container_path: str) -> Path:
    """The repository file a bind mount puts at ``container_path``."""
    for vol in SERVICES[service].get("volumes", []):
        src, dst = vol.split(":")[:2]
        if src.startswith("./") and PurePosixPath(container_path).is_relative_to(dst):
            return ROOT / src / PurePosixPath(container_path).relative_to(dst)
    raise AssertionError(f"{service}: {container_path} is not in a mounted repo path")


def test_service_settings_are_valid(clean_env: pytest.MonkeyPatch) -> None:
    s = _service_settings(clean_env, "regimetune", drop=("REGIMETUNE_TUNING__EXECUTOR",))
    assert s.store.url.startswith("postgresql+psycopg://regimetune:")
    assert s.push.backend == "reference" and s.push.url == "http://backend:8081"
    assert s.push.token is not None and [t.get_secret_value() for t in s.auth.write_tokens] == ["change-me"]
    assert s.engine.window_s == 60.0 and s.tuning.max_workers == 2
    # the mounted example file is read, and the environment wins over it
    assert s.engine.mode == "auto"


def test_tuning_runs_on_the_dask_scheduler(clean_env: pytest.MonkeyPatch) -> None:
    from regimetune.api import load_settings

    address = SERVICES["regimetune"]["environment"]["REGIMETUNE_TUNING__EXECUTOR"]
    assert address == "tcp://dask-scheduler:8786"
    try:
        load_settings(tuning={"executor": "tcp://127.0.0.1:8786"})
    except ConfigError:
        pytest.skip("tuning.executor does not take a Dask scheduler address yet (issue 15 item 2)")
    s = _service_settings(clean_env, "regimetune")
    assert s.tuning.executor == address


def test_migrate_and_serve_use_the_same_store() -> None:
    env = SERVICES["regimetune"]["environment"]
    assert SERVICES["migrate"]["environment"]["REGIMETUNE_STORE__URL"] == env["REGIMETUNE_STORE__URL"]
    pg = SERVICES["postgres"]["environment"]
    url = env["REGIMETUNE_STORE__URL"]
    assert url == (
        f"postgresql+psycopg://{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}@postgres:5432/{pg['POSTGRES_DB']}"
    )


def test_tokens_match_between_services() -> None:
    import json

    env = SERVICES["regimetune"]["environment"]
    assert env["REGIMETUNE_PUSH__TOKEN"] == SERVICES["backend"]["environment"]["REGIMETUNE_BACKEND_TOKEN"]
    daemon = SERVICES["demo-daemon"]["environment"]["REGIMETUNE_REPLAY_TOKEN"]
    assert daemon in json.loads(env["REGIMETUNE_AUTH__WRITE_TOKENS"])


# -- ports ----------------------------------------------------------------------------------------


def _listening() -> dict[str, set[int]]:
    """The ports each service listens on: the --port of our commands, the images' defaults."""
    out = {k: set(v) for k, v in IMAGE_PORTS.items()}
    for name, s in OURS.items():
        port = option(argv(s), "--port")
        if port is not None:
            out[name] = {int(port)}
    return out


_URL = re.compile(r"\b(?:https?|tcp|postgresql\+psycopg)://(?:[^@/\s\"']*@)?([a-z][\w-]*):(\d+)")


def _urls() -> list[tuple[str, str, int]]:
    """(where, host, port) of every URL in the compose file and the mounted configs."""
    found = []
    text = yaml.safe_dump(compose())
    found += [("docker-compose.yml", h, int(p)) for h, p in _URL.findall(text)]
    for cfg in (ROOT / "deploy").rglob("*.yml"):
        found += [(str(cfg.relative_to(ROOT)), h, int(p)) for h, p in _URL.findall(cfg.read_text())]
    prom = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    for job in prom["scrape_configs"]:
        for sc in job["static_configs"]:
            for t in sc["targets"]:
                host, port = t.split(":")
                found.append((f"prometheus job {job['job_name']}", host, int(port)))
    return found


def test_every_url_points_at_a_service_listening_there() -> None:
    listening = _listening()
    urls = [u for u in _urls() if u[1] not in ("127.0.0.1", "localhost")]
    assert len(urls) >= 8
    for where, host, port in urls:
        assert host in SERVICES, f"{where}: no service {host}"
        assert port in listening.get(host, set()), f"{where}: {host} does not listen on {port}"


def test_published_ports_are_the_listening_ones() -> None:
    listening = _listening()
    for name, s in SERVICES.items():
        for p in s.get("ports", []):
            host, container = (int(x) for x in str(p).split(":"))
            assert container in listening.get(name, set()) or (name == "dask-scheduler" and container == 8786)
            assert host == container


def test_healthchecks_ask_the_port_the_service_listens_on() -> None:
    for name, s in OURS.items():
        test = " ".join(s.get("healthcheck", {}).get("test", []))
        if not test:
            continue
        ports = {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", test)}
        assert ports and ports <= _listening()[name], name


# -- paths ----------------------------------------------------------------------------------------


def test_every_mounted_repo_path_exists() -> None:
    mounts = [(n, v) for n, s in SERVICES.items() for v in s.get("volumes", []) if v.startswith("./")]
    assert len(mounts) >= 4
    for name, vol in mounts:
        assert (ROOT / vol.split(":")[0]).exists(), f"{name}: {vol}"


def test_named_volumes_are_declared_and_owned_by_the_image_user() -> None:
    declared = set(compose()["volumes"])
    made = " ".join(a for i, a in dockerfile() if i == "RUN")
    for name, s in SERVICES.items():
        for vol in s.get("volumes", []):
            src, dst = vol.split(":")[:2]
            if src.startswith("./"):
                continue
            assert src in declared, f"{name}: volume {src} is not declared"
            if name in OURS:  # a non-root user writes there: the image must create the directory
                assert dst in made, f"{name}: {dst} is not created (and chowned) by the Dockerfile"


def test_paths_the_commands_name_are_inside_mounts() -> None:
    def mounted(service: str, path: str) -> bool:
        return any(
            PurePosixPath(path).is_relative_to(v.split(":")[1]) for v in SERVICES[service].get("volumes", [])
        )

    assert _host_path("regimetune", option(SERVICES["regimetune"]["command"], "--config") or "").is_file()
    assert mounted("backend", option(SERVICES["backend"]["command"], "--state") or "")
    assert mounted("regimetune", SERVICES["regimetune"]["environment"]["REGIMETUNE_TUNING__UPLOAD_DIR"])
    trace = SERVICES["demo-trace"]["command"][1]
    assert SERVICES["demo-daemon"]["command"][1] == trace
    assert mounted("demo-trace", trace) and mounted("demo-daemon", trace)
    prom = SERVICES["prometheus"]["command"]
    config = next(a.split("=", 1)[1] for a in prom if a.startswith("--config.file="))
    assert _host_path("prometheus", config).is_file()
    rules = yaml.safe_load(_host_path("prometheus", config).read_text())["rule_files"]
    assert all(_host_path("prometheus", str(PurePosixPath(config).parent / r)).is_file() for r in rules)
    home = SERVICES["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert _host_path("grafana", home).is_file()
    for sub in ("datasources", "dashboards"):
        assert any(_host_path("grafana", f"/etc/grafana/provisioning/{sub}").glob("*.yml"))
    provider = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/regimetune.yml").read_text())
    assert _host_path("grafana", provider["providers"][0]["options"]["path"]).is_dir()
