"""The ``generate`` and ``windows`` commands through typer's CliRunner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from regimetune.cli.main import app
from regimetune.collectors import read_trace, read_windows
from regimetune.models import EventBatch

runner = CliRunner()


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("cli") / "g.csv"
    r = runner.invoke(
        app,
        ["generate", str(p), "--duration", "300", "--sim-workers", "8", "--seed", "3", "--preset", "classic"],
    )
    assert r.exit_code == 0, r.output
    assert "wrote" in r.output
    return p


def test_generate_writes_a_labelled_trace(trace: Path) -> None:
    b = EventBatch.concat(list(read_trace(trace)))
    assert len(b) > 1000
    assert sorted(set(b.label.tolist())) == [0, 1, 2, 3]


def test_generate_a_preset(tmp_path: Path) -> None:
    p = tmp_path / "s.parquet"
    args = ["generate", str(p), "--duration", "600", "--sim-workers", "16", "--preset", "stationary"]
    r = runner.invoke(app, [*args, "--seed", "2"])
    assert r.exit_code == 0, r.output
    b = EventBatch.concat(list(read_trace(p)))
    assert set(b.label.tolist()) == {0}
    assert 0.5 <= b.ts[0] < 10.5 and b.ts[-1] < b.ts[0] + 600  # starts off a window boundary


@pytest.mark.parametrize("fmt,suffix", [("parquet", "parquet"), ("oracle", "bin"), ("jsonl", "jsonl")])
def test_generate_other_formats_and_buckets(tmp_path: Path, fmt: str, suffix: str) -> None:
    p = tmp_path / f"g.{suffix}"
    r = runner.invoke(
        app, ["generate", str(p), "--duration", "60", "--sim-workers", "4", "--buckets", "8", "--format", fmt]
    )
    assert r.exit_code == 0, r.output
    b = EventBatch.concat(list(read_trace(p)))
    assert len(b) > 100
    if fmt != "oracle":
        assert b.bucket.max() < 8 and b.bucket.min() >= 0


def test_windows_prints_a_summary(trace: Path) -> None:
    r = runner.invoke(app, ["windows", str(trace), "--window", "10"])
    assert r.exit_code == 0, r.output
    assert "30 windows of 10 s" in r.output
    assert "total" in r.output


def test_windows_writes_parquet(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.parquet"
    r = runner.invoke(
        app, ["windows", str(trace), "--window", "5", "--top-k", "3", "--buckets", "4", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    f = read_windows(out)
    assert len(f) == 60 and f.n_buckets == 4
    assert f["reads"].sum() + f["writes"].sum() == f.bucket_load.sum()


def test_windows_with_mapped_headerless_columns(tmp_path: Path) -> None:
    p = tmp_path / "t.tsv"
    p.write_text("LOOKUP\t1500\tk\t7\nSTORE\t2500\tk\t8\n")
    r = runner.invoke(
        app,
        [
            "windows",
            str(p),
            "--columns",
            "op,ts,-,key",
            "--no-header",
            "--time-unit",
            "ms",
            "--read-op",
            "lookup",
            "--write-op",
            "store",
            "--out",
            str(tmp_path / "w.csv"),
        ],
    )
    assert r.exit_code == 0, r.output
    f = read_windows(tmp_path / "w.csv")
    assert f["reads"].tolist() == [1, 0] or f["reads"].tolist() == [1, 0][: len(f)]
    assert f["writes"].sum() == 1 and f["start"][0] == 1.5  # the first window starts at the first event


def test_bad_line_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_text("ts,key,op\n1,1,get\n2,2,frobnicate\n3,3,get\n")
    r = runner.invoke(app, ["windows", str(p)])
    assert r.exit_code == 2
    assert "bad.csv:3" in r.output and "unknown op" in r.output
    assert "Traceback" not in r.output
    r = runner.invoke(app, ["windows", str(p), "--skip-bad", "1"])
    assert r.exit_code == 0, r.output
    assert "skipped 1 bad record" in r.output


@pytest.mark.parametrize(
    "args,needle",
    [
        (["windows", "/nonexistent/t.csv"], "no such trace file"),
        (["windows", "x.unknownext"], "extension"),
        (["windows", "TRACE", "--window", "0"], "--window"),
        (["windows", "TRACE", "--columns", "ts,zz"], "unknown column role"),
        (["windows", "TRACE", "--time-unit", "h"], "time unit"),
        (["windows", "TRACE", "--out", "w.txt"], "--out"),
        (["generate", "OUT", "--growth", "-1"], "growth"),
        (["generate", "OUT", "--preset", "nope"], "preset must be one of"),
        (["generate", "/nonexistent/dir/g.csv", "--duration", "10"], "does not exist"),
    ],
)
def test_bad_options_exit_2(trace: Path, tmp_path: Path, args: list[str], needle: str) -> None:
    args = [str(trace) if a == "TRACE" else str(tmp_path / "g.csv") if a == "OUT" else a for a in args]
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    assert needle in r.output


def test_truncated_oracle_exits_2(tmp_path: Path) -> None:
    p = tmp_path / "t.bin"
    rec = np.zeros(3, dtype=[("t", "<u4"), ("k", "<u8"), ("s", "<u4"), ("n", "<i8")])
    p.write_bytes(rec.tobytes()[:-7])
    r = runner.invoke(app, ["windows", str(p)])
    assert r.exit_code == 2
    assert "multiple of 24" in r.output


def test_truncated_gzip_and_backwards_time_exit_2(trace: Path, tmp_path: Path) -> None:
    gz = tmp_path / "t.csv.gz"
    r = runner.invoke(app, ["generate", str(gz), "--duration", "60", "--sim-workers", "4"])
    assert r.exit_code == 0, r.output
    gz.write_bytes(gz.read_bytes()[:-100])
    r = runner.invoke(app, ["windows", str(gz)])
    assert r.exit_code == 2
    assert "truncated or corrupt" in r.output
    back = tmp_path / "back.csv"
    back.write_text("ts,key,op\n10,1,get\n11,2,get\n3,3,get\n12,4,get\n")
    r = runner.invoke(app, ["windows", str(back)])
    assert r.exit_code == 2
    assert "back.csv:4" in r.output and "goes back" in r.output


def test_the_command_starts_without_the_heavy_libraries() -> None:
    # each command imports what it needs when it runs: `regimetune --help` and the service's
    # start do not wait for numba, pyarrow, pandas or the learning libraries
    import subprocess
    import sys

    heavy = ("numba", "pyarrow", "pandas", "sklearn", "river", "nevergrad", "datasketches", "scipy")
    code = f"import sys, regimetune.cli.main; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_collectors_package_names_what_it_loads_lazily() -> None:
    import regimetune.collectors as c

    assert sorted(c.__all__) == sorted(c._WHERE)
    assert all(callable(getattr(c, n)) or n == "ORACLE_DTYPE" for n in c.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = c.nope
