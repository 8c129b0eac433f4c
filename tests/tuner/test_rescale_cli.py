"""``regimetune plan``: tables in, plans out, clear refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from regimetune.cli import plan as plan_cli
from regimetune.tuner.rescale.io import read_bucket_table

TABLE = "bucket,load,size,server\n0,4,4,0\n1,2,2,0\n2,3,3,1\n3,3,3,1\n"


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()
    plan_cli.register(a)

    @a.callback()
    def _root() -> None:  # keeps "plan" as a sub-command
        pass

    return a


def test_plan_json_matches_the_hand_worked_example(app: typer.Typer, tmp_path: Path) -> None:
    p = tmp_path / "b.csv"
    p.write_text(TABLE)
    r = CliRunner().invoke(app, ["plan", str(p), "--commission", "1", "--net-bandwidth", "1", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["placement"] == {"0": 0, "1": 1, "2": 1, "3": 2}
    assert out["metrics"]["t_max"] == 3.0
    r = CliRunner().invoke(app, ["plan", str(p), "--decommission", "1", "--weights", "1,0.5,2"])
    assert r.exit_code == 0, r.output
    assert "L_max" in r.stdout and "migrations" in r.stdout
    r = CliRunner().invoke(
        app, ["plan", str(p), "--decommission", "1", "--model", "storage", "--write-bandwidth", "1", "--json"]
    )
    assert r.exit_code == 0, r.output
    # Everything on server 1 (6 B) moves to 0: written at 1 B/s there, read at 1 GB/s on 1.
    assert json.loads(r.stdout)["metrics"]["t_max"] == 6.0


def test_json_table_and_extra_servers(app: typer.Typer, tmp_path: Path) -> None:
    p = tmp_path / "b.json"
    p.write_text(
        json.dumps(
            [
                {"bucket": 0, "load": 1, "size": 5, "server": 3},
                {"bucket": 1, "load": 1, "size": 5, "server": 3},
            ]
        )
    )
    buckets, placement, servers = read_bucket_table(p)
    assert [b.id for b in buckets] == [0, 1] and placement == {0: 3, 1: 3} and servers == [3]
    r = CliRunner().invoke(app, ["plan", str(p), "--decommission", "3", "--servers", "7", "--json"])
    assert r.exit_code == 0, r.output
    assert set(json.loads(r.stdout)["placement"].values()) == {7}


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ("bucket,load,size,server\n0,1,x,0\n", ["--commission", "1"], "b.csv:2: size is not a number"),
        ("bucket,load,server\n0,1,0\n", ["--commission", "1"], "missing size"),
        (
            "bucket,load,size,server\n0,1,1,0\n0,1,1,0\n",
            ["--commission", "1"],
            "b.csv:3: bucket 0 appears twice",
        ),
        (TABLE, ["--decommission", "0,1"], "every server"),
        (TABLE, ["--decommission", "9"], "unknown server"),
        (TABLE, ["--commission", "1", "--decommission", "1"], "exactly one"),
        (TABLE, ["--commission", "1", "--weights", "XYZ"], "--weights"),
        (TABLE, ["--commission", "1", "--capacity", "3"], "capacity"),
    ],
)
def test_bad_input_is_one_clear_line(
    app: typer.Typer, tmp_path: Path, content: str, args: list[str], message: str
) -> None:
    p = tmp_path / "b.csv"
    p.write_text(content)
    r = CliRunner().invoke(app, ["plan", str(p), *args])
    assert r.exit_code == 2
    assert message in r.stderr.replace("\n", "")
    assert "Traceback" not in r.output
