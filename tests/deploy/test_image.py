"""The image compiles its numba kernels where its containers find them, and compose builds it
once. Docker is not on these machines: the Dockerfile is read, the warm-up script it runs is
run here, and numba's rule that makes the ownership matter is checked on a small kernel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from .conftest import ROOT, compose, dockerfile, exec_form

WARM_UP = ROOT / "deploy" / "warm-up.sh"


def _final_stage() -> list[tuple[str, str]]:
    steps = dockerfile()
    last_from = max(i for i, (instr, _) in enumerate(steps) if instr == "FROM")
    return steps[last_from:]


def _env(steps: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for instr, args in steps:
        if instr == "ENV":
            for word in exec_form(args):
                name, _, value = word.partition("=")
                out[name] = value
    return out


def test_the_kernels_are_compiled_by_the_runtime_user_into_a_cache_it_owns() -> None:
    steps = _final_stage()
    cache = _env(steps)["NUMBA_CACHE_DIR"]
    users = [i for i, (instr, _) in enumerate(steps) if instr == "USER"]
    assert users, "the image runs as root"
    runtime_user = steps[users[-1]][1]
    warm = [i for i, (instr, args) in enumerate(steps) if instr == "RUN" and "warm-up.sh" in args]
    assert len(warm) == 1, "the warm-up runs once"
    # compiled after the last USER: by the user every container runs as
    assert warm[0] > users[-1]
    # the cache directory is made for that user before it switches to it
    made = [
        args
        for instr, args in steps[: users[-1]]
        if instr == "RUN" and cache in args and (f"-o {runtime_user}" in args or "chown" in args)
    ]
    assert made, f"{cache} is not created owned by {runtime_user}"
    # nothing after the warm-up changes the kernels' sources or the cache (a newer source
    # file would make numba compile again)
    later = steps[warm[0] + 1 :]
    assert not any(instr in ("COPY", "ADD", "RUN") for instr, _ in later)


def test_the_warm_up_copied_into_the_image_is_the_repository_script() -> None:
    copies = [exec_form(args) for instr, args in _final_stage() if instr == "COPY" and "warm-up" in args]
    assert copies and copies[0][0] == "deploy/warm-up.sh"
    runs = [args for instr, args in _final_stage() if instr == "RUN" and "warm-up.sh" in args]
    assert exec_form(runs[0]) == ["sh", copies[0][1]]


def test_the_warm_up_script_runs(tmp_path: Path) -> None:
    """The script the image runs at build time, run against this checkout (the kernels are
    already in numba's cache here, so it checks the commands, not the compile time)."""
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT / "src"),
        "TMPDIR": str(tmp_path),
    }
    r = subprocess.run(["sh", str(WARM_UP)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert list(tmp_path.iterdir()) == [], "the warm-up leaves its trace behind"


@contextmanager
def _read_only(dirs: list[Path]) -> Iterator[None]:
    """Make ``dirs`` unwritable for this process: by their mode, or, for root (which writes
    into any mode), by the immutable attribute; skips where neither is possible."""
    if os.geteuid() != 0:
        for d in dirs:
            d.chmod(0o555)
        try:
            yield
        finally:
            for d in dirs:
                d.chmod(0o755)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", *map(str, dirs)]).returncode:
        pytest.skip("root, and no immutable attribute on this file system")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, dirs)], check=True)


def test_numba_passes_over_a_cache_directory_it_cannot_write(tmp_path: Path) -> None:
    """Why the ownership matters: a kernel cached in a directory its user cannot write is
    compiled again (numba's cache locator tries to write there first)."""
    (tmp_path / "kernel.py").write_text(
        textwrap.dedent(
            """
            from numba import njit

            @njit(cache=True)
            def twice(x):
                return 2 * x

            twice(3)
            print(sum(twice.stats.cache_hits.values()))
            """
        )
    )
    cache = tmp_path / "cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(tmp_path)}

    def hits() -> int:
        r = subprocess.run(
            [sys.executable, "-c", "import kernel"], env=env, capture_output=True, text=True, timeout=300
        )
        assert r.returncode == 0, r.stderr
        return int(r.stdout.strip())

    assert hits() == 0  # compiled and saved
    assert hits() == 1  # loaded from the cache
    with _read_only([d for d in [cache, *cache.rglob("*")] if d.is_dir()]):
        assert hits() == 0  # unwritable: compiled again, as a cache root compiled for another user


def test_compose_builds_the_image_once() -> None:
    svc = compose()["services"]
    ours = {n: s for n, s in svc.items() if s.get("image") == "regimetune:latest"}
    assert set(ours) >= {"migrate", "regimetune", "backend", "dask-scheduler", "dask-worker", "demo-daemon"}
    builders = [n for n, s in ours.items() if "build" in s]
    assert builders == ["regimetune"]
    assert ours["regimetune"]["build"] == "."
    # the others run the image that service built, never one pulled under the same name
    assert all(s.get("pull_policy") == "never" for n, s in ours.items() if n != "regimetune")
    assert not any("build" in s for n, s in svc.items() if n not in ours)
