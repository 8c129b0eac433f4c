"""The README's examples cannot rot: every ``regimetune`` command in its shell blocks is parsed
by the real command (options, types, ranges, required arguments), every ``make`` target and
compose profile it names exists, and the blocks marked ``<!-- readme: run -->`` are run, in
order, in one directory (the tour's servers on free ports instead of 8080 and 8081)."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.main
import yaml

from regimetune.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RUN_MARK = "<!-- readme: run -->"
SHELL_WORDS = {"regimetune", "make", "docker", "curl"}


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    run: bool
    line: int


def blocks() -> list[Block]:
    out = []
    lines = README.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"```(\w+)$", lines[i])
        if m:
            end = lines.index("```", i + 1)
            run = i > 0 and lines[i - 1].strip() == RUN_MARK
            out.append(Block(m.group(1), "\n".join(lines[i + 1 : end]), run, i + 1))
            i = end
        i += 1
    return out


def commands(code: str) -> list[list[str]]:
    """The shell commands of a block: continuation lines joined, comments and a trailing ``&``
    dropped, leading ``VAR=value`` assignments removed."""
    out = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            words = words[1:]
        if words and words[-1] == "&":
            words = words[:-1]
        if words:
            out.append(words)
    return out


SHELL = [b for b in blocks() if b.lang == "sh"]
CLI = [(b.line, words) for b in SHELL for words in commands(b.code) if words[0] == "regimetune"]


def test_the_readme_is_a_manual_not_a_log() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 350
    for heading in ("## Two commands", "## A 5-minute tour", "## Commands", "## Regimes", "## Configuration",
                    "## Redis", "## Durability", "## Deployment", "## Limits"):  # fmt: skip
        assert f"\n{heading}\n" in text, heading
    assert CLI, "no regimetune command found"


@pytest.mark.parametrize("block", SHELL, ids=[f"line{b.line}" for b in SHELL])
def test_every_shell_command_is_one_the_readme_explains(block: Block) -> None:
    for words in commands(block.code):
        assert words[0] in SHELL_WORDS, f"README line {block.line}: {' '.join(words)}"


@pytest.mark.parametrize(("line", "words"), CLI, ids=[f"line{n}-{w[1]}" for n, w in CLI])
def test_every_regimetune_command_parses(line: int, words: list[str]) -> None:
    group = typer.main.get_command(app)
    cmd = group.commands.get(words[1])  # type: ignore[attr-defined]
    assert cmd is not None, f"README line {line}: no command {words[1]!r}"
    cmd.make_context(f"regimetune {words[1]}", list(words[2:]))  # raises on an unknown option or bad value
    hidden = {name for p in cmd.params if getattr(p, "hidden", False) for name in p.opts}
    assert not hidden & set(words), f"README line {line} uses an old option name"


def test_make_targets_and_compose_profiles_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    profiles = {p for s in services.values() for p in s.get("profiles", [])}
    for block in SHELL:
        for words in commands(block.code):
            if words[0] == "make":
                assert re.search(rf"^{re.escape(words[1])}:", makefile, re.M), words
            if words[:2] == ["docker", "compose"] and "--profile" in words:
                assert words[words.index("--profile") + 1] in profiles, words


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], list[int]]]:
    """A directory, an environment with this checkout's ``regimetune`` first on the PATH, and
    the process groups of the blocks, each killed at the end (the tour's servers run in the
    background)."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT / "src"),
        "COLUMNS": "200",
    }
    groups: list[int] = []
    yield tmp_path, env, groups
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)


@pytest.mark.slow
def test_the_runnable_blocks_run(sandbox: tuple[Path, dict[str, str], list[int]]) -> None:
    """The tour and the examples marked to run, as a user would paste them, one after the
    other; 8080 and 8081 become free ports (the machine may be serving on those)."""
    if not (ROOT / "src" / "regimetune").is_dir():
        pytest.skip("not a source checkout")
    cwd, env, groups = sandbox
    ports = {"8080": str(_free_port()), "8081": str(_free_port())}
    runnable = [b for b in blocks() if b.run]
    assert {b.lang for b in runnable} == {"sh", "python"}
    for block in runnable:
        code = re.sub(r"\b(8080|8081)\b", lambda m: ports[m.group(1)], block.code)
        argv = (
            ["bash", "-e", "-o", "pipefail", "-c", code]
            if block.lang == "sh"
            else [sys.executable, "-c", code]
        )
        log = cwd / f"block-{block.line}.log"  # a file, not a pipe: the servers it starts keep it open
        with log.open("w") as f:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
            )
            groups.append(proc.pid)
            proc.wait(timeout=600)
        out = log.read_text()
        assert proc.returncode == 0, f"README block at line {block.line} failed:\n{out[-3000:]}"
        assert "Traceback" not in out, out[-3000:]
    # what the tour promised exists
    for name in ("regimes.png", "detect.html", "tune.html", "policy.json", "detector.json"):
        assert (cwd / "out" / name).is_file(), name
