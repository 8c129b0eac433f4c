"""Trace readers and writers: every format, compression, column/op mapping, units, bad input."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from regimetune.collectors import ORACLE_DTYPE, TraceSpec, read_trace, window_frame, write_events
from regimetune.collectors.writers import next_access
from regimetune.models import ConfigError, EventBatch, InputError, TraceFormatError


def _batch(n: int = 5000, seed: int = 0) -> EventBatch:
    rng = np.random.default_rng(seed)
    return EventBatch.from_columns(
        ts=np.sort(rng.random(n) * 50.0),
        key=rng.integers(0, 2**40, n),
        op=(rng.random(n) < 0.2).astype(np.uint8),
        size=rng.integers(0, 10_000, n),
        bucket=rng.integers(-1, 8, n),
        label=rng.integers(0, 4, n),
    )


def _read_all(path: Path, **kw: object) -> EventBatch:
    return EventBatch.concat(list(read_trace(path, **kw)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name", ["t.csv", "t.csv.gz", "t.csv.zst", "t.tsv", "t.jsonl", "t.jsonl.gz", "t.parquet"]
)
def test_round_trip_every_text_and_columnar_format(tmp_path: Path, name: str) -> None:
    b = _batch()
    p = tmp_path / name
    assert write_events([b.slice(0, 1234), b.slice(1234, len(b))], p) == len(b)
    reader = read_trace(p, chunk_rows=300)
    batches = list(reader)
    assert len(batches) > 3, "small chunk_rows must give several batches"
    got = EventBatch.concat(batches)
    for col in EventBatch.COLUMNS:
        np.testing.assert_array_equal(getattr(got, col), getattr(b, col), err_msg=col)
    assert reader.bad_records == 0
    assert reader.records == len(b)


def test_oracle_round_trip_keeps_whole_seconds_and_next_access(tmp_path: Path) -> None:
    b = _batch(2000)
    p = tmp_path / "t.oracleGeneral.bin"
    write_events([b], p)
    raw = np.fromfile(p, dtype=ORACLE_DTYPE)
    np.testing.assert_array_equal(raw["next_vtime"], next_access(b.key))
    got = _read_all(p, chunk_rows=333)
    np.testing.assert_array_equal(got.ts, np.floor(b.ts))
    np.testing.assert_array_equal(got.key, b.key)
    np.testing.assert_array_equal(got.size, b.size)
    assert (got.op == 0).all()


def test_next_access_against_brute_force() -> None:
    keys = np.random.default_rng(3).integers(0, 20, 300).astype(np.uint64)
    want = [next((j for j in range(i + 1, len(keys)) if keys[j] == keys[i]), -1) for i in range(len(keys))]
    assert next_access(keys).tolist() == want


def test_headerless_csv_with_positional_columns_and_skipped_column(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("10,GET,xx,7\n11,put,yy,8\n12,r,zz,7\n")
    b = _read_all(p, spec=TraceSpec(columns="ts,op,-,key"))
    assert b.ts.tolist() == [10.0, 11.0, 12.0]
    assert b.key.tolist() == [7, 8, 7]
    assert b.op.tolist() == [0, 1, 0]


def test_header_names_and_time_unit_ms(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("when,what,obj\n1500,get,3\n2500,set,4\n")
    b = _read_all(p, spec=TraceSpec(columns="ts=when,op=what,key=obj", time_unit="ms"))
    assert b.ts.tolist() == [1.5, 2.5]
    assert b.op.tolist() == [0, 1]


def test_header_guessed_from_aliases(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("version,time,op,size,lbn\n1,5,28,512,99\n1,6,2a,512,98\n")
    b = _read_all(p, spec=TraceSpec(time_unit="us"))
    assert b.key.tolist() == [99, 98]
    assert b.ts.tolist() == [5e-6, 6e-6]
    assert b.op.tolist() == [0, 1]
    assert b.size.tolist() == [512, 512]


def test_custom_ops_and_delimiter(tmp_path: Path) -> None:
    p = tmp_path / "t.txt"
    p.write_text("1;LOOKUP;5\n2;STORE;6\n")
    spec = TraceSpec(
        columns="ts,op,key", read_ops=frozenset({"lookup"}), write_ops=frozenset({"store"}), delimiter=";"
    )
    assert _read_all(p, spec=spec).op.tolist() == [0, 1]
    with pytest.raises(TraceFormatError, match=r"t.txt:1: unknown op 'LOOKUP'"):
        _read_all(p, spec=TraceSpec(columns="ts,op,key", delimiter=";"))


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("3.0,9", "expected 3 columns, got 2"),
        ("3.0,abc,get", "key 'abc' is not an integer"),
        ("x,9,get", "timestamp 'x' is not a number"),
        ("nan,9,get", "not finite"),
        ("3.0,9,delete", "unknown op 'delete'"),
        ("0.5,9,get", "timestamp 0.5 goes back more than 1.0 s"),
        ("3.0,-4,get", "out of range"),
        ("-3.0,9,get", "timestamp '-3.0' is negative"),
        ("7.9e18,9,get", "timestamp '7.9e18' is after the year 9999 in seconds: is it the time column?"),
    ],
)
def test_bad_csv_line_is_named_or_skipped(tmp_path: Path, line: str, reason: str) -> None:
    good = [f"{2.0 + i * 0.001:.3f},{i},get" for i in range(40)]
    p = tmp_path / "bad.csv"
    p.write_text("ts,key,op\n" + "\n".join([*good, line, *good[:5]]) + "\n")
    with pytest.raises(TraceFormatError) as err:
        _read_all(p, chunk_rows=16)
    assert err.value.line == 42
    assert reason in str(err.value)
    assert str(p) in str(err.value)
    reader = read_trace(p, skip_bad=1, chunk_rows=16)
    got = EventBatch.concat(list(reader))
    assert len(got) == 45
    assert reader.bad_records == 1


def test_an_unknown_op_names_the_options_that_fix_it(tmp_path: Path) -> None:
    p = tmp_path / "kv.csv"
    p.write_text(
        "1504334611,DBMemoryPut,0,14045287823504495930\n1504334611,DBMemoryGet,0,14045287823504495930\n"
    )
    with pytest.raises(TraceFormatError) as err:
        _read_all(p, spec=TraceSpec(columns="ts,op,-,key"))
    msg = str(err.value)
    assert msg.startswith(f"{p}:1: unknown op 'DBMemoryPut' (reads: 0, 28, get, r, read; writes: ")
    assert msg.endswith("name this trace's ops with --read-op and --write-op")
    spec = TraceSpec(
        columns="ts,op,-,key", read_ops=frozenset({"DBMemoryGet"}), write_ops=frozenset({"DBMemoryPut"})
    )
    assert _read_all(p, spec=spec).op.tolist() == [1, 0]


def test_swapped_columns_fail_on_the_first_line(tmp_path: Path) -> None:
    """A 64-bit key read as the time (columns swapped) is refused at once, not where the keys
    first go down, and the message holds no numpy repr."""
    p = tmp_path / "kv.csv"
    rows = [f"{1504334611 + i // 1000},DBMemoryGet,0,14045287823504495930" for i in range(5000)]
    p.write_text("\n".join(rows) + "\n")
    spec = TraceSpec(columns="key,op,-,ts", read_ops=frozenset({"DBMemoryGet"}), write_ops=frozenset({"x"}))
    with pytest.raises(TraceFormatError) as err:
        _read_all(p, spec=spec, chunk_rows=256)
    assert err.value.line == 1
    assert "'14045287823504495930' is after the year 9999 in seconds" in str(err.value)
    assert "--columns and --time-unit" in str(err.value) and "np." not in str(err.value)
    # nanoseconds read as seconds: the same message points at --time-unit
    ns = tmp_path / "ns.csv"
    ns.write_text("ts,key\n1504334611000000000,1\n")
    with pytest.raises(TraceFormatError, match=r"ns\.csv:2: .* --time-unit"):
        _read_all(ns)
    assert _read_all(ns, spec=TraceSpec(time_unit="ns")).ts.tolist() == [1504334611.0]


@pytest.mark.parametrize(
    ("column", "reason"),
    [
        ({"ts": [1.0, -2.0, 3.0], "key": [1, 2, 3]}, "record 2: timestamp -2.0 is negative"),
        ({"ts": [1.0, 2.0, 7.9e18], "key": [1, 2, 3]}, "record 3: timestamp 7.9e+18 is after the year 9999"),
        (
            {"ts": [1.0, 2.0, 3.0], "key": [1, 2, 3], "op": ["get", "DBMemoryPut", "get"]},
            "record 2: unknown op 'DBMemoryPut' (reads: ",
        ),
    ],
)
def test_parquet_bad_times_and_ops_are_named(
    tmp_path: Path, column: dict[str, list[object]], reason: str
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "t.parquet"
    pq.write_table(pa.table(column), p)
    with pytest.raises(TraceFormatError) as err:
        _read_all(p)
    assert reason in str(err.value)
    assert len(_read_all(p, skip_bad=1)) == 2


def test_skip_budget_exceeded_names_the_line_past_the_budget(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_text("1,1,get\n1,x,get\n2,2,get\n2,y,get\n3,z,get\n4,4,get\n")
    with pytest.raises(TraceFormatError, match="more than --skip-bad 2") as err:
        _read_all(p, skip_bad=2)
    assert err.value.line == 5


def test_line_numbers_stay_exact_across_blocks_and_blank_lines(tmp_path: Path) -> None:
    rows = [f"{i},{i % 97},get" for i in range(20_000)]
    rows[15_000] = "15000,oops,get"
    rows.insert(100, "")
    p = tmp_path / "big.csv.gz"
    with gzip.open(p, "wt") as f:
        f.write("\n".join(rows) + "\n")
    with pytest.raises(TraceFormatError) as err:
        _read_all(p, chunk_rows=500)
    assert err.value.line == 15_002  # one blank line inserted before it, 1-based


def test_small_backwards_jitter_is_tolerated(tmp_path: Path) -> None:
    p = tmp_path / "j.csv"
    p.write_text("10.0,1,get\n9.5,2,get\n11.0,3,get\n")
    assert len(_read_all(p)) == 3
    with pytest.raises(TraceFormatError, match="goes back"):
        _read_all(p, spec=TraceSpec(ts_tolerance=0.1))


def test_bad_jsonl_line(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"ts": 1, "key": 2, "op": "get"}\n{"ts": 2, "key": 3, "op": 1}\n{"ts": 3, "op": "get"}\n')
    with pytest.raises(TraceFormatError, match=r"t.jsonl:3: missing key"):
        _read_all(p)
    r = read_trace(p, skip_bad=1)
    b = EventBatch.concat(list(r))
    assert b.op.tolist() == [0, 1] and r.bad_records == 1


def test_parquet_nan_timestamp_is_a_bad_record(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"ts": [1.0, float("nan"), 3.0], "key": [1, 2, 3]}), p)
    with pytest.raises(TraceFormatError, match="record 2"):
        _read_all(p)
    assert len(_read_all(p, skip_bad=1)) == 2


def test_truncated_files_give_clear_errors(tmp_path: Path) -> None:
    b = _batch(3000)
    gz = tmp_path / "t.csv.gz"
    write_events([b], gz)
    data = gz.read_bytes()
    gz.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="truncated or corrupt"):
        _read_all(gz)
    zst = tmp_path / "t.csv.zst"
    write_events([b], zst)
    data = zst.read_bytes()
    zst.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError):
        _read_all(zst)
    ora = tmp_path / "t.bin"
    write_events([b], ora)
    ora.write_bytes(ora.read_bytes()[:-5])
    with pytest.raises(TraceFormatError, match="not a multiple of 24") as err:
        _read_all(ora)
    assert err.value.offset == (3000 - 1) * 24
    pqf = tmp_path / "t.parquet"
    pqf.write_bytes(b"PAR1 not really")
    with pytest.raises(TraceFormatError, match="Parquet"):
        _read_all(pqf)


def test_oracle_time_going_back_names_the_offset(tmp_path: Path) -> None:
    rec = np.zeros(4, dtype=ORACLE_DTYPE)
    rec["time"] = [10, 11, 5, 12]
    rec["obj_id"] = [1, 2, 3, 4]
    p = tmp_path / "t.bin"
    rec.tofile(p)
    with pytest.raises(TraceFormatError) as err:
        _read_all(p)
    assert err.value.offset == 48


def test_missing_file_unknown_format_and_bad_spec() -> None:
    with pytest.raises(InputError, match="no such trace file"):
        _read_all(Path("/nonexistent/x.csv"))
    with pytest.raises(ConfigError, match="extension"):
        _read_all(Path("x.weird"))
    with pytest.raises(ConfigError, match="unknown column role"):
        TraceSpec(columns="ts,kee")
    with pytest.raises(ConfigError, match="which column is 'key'"):
        TraceSpec(columns="ts,op")
    with pytest.raises(ConfigError, match="both read and write"):
        TraceSpec(read_ops=frozenset({"get"}), write_ops=frozenset({"GET"}))
    with pytest.raises(ConfigError, match="time unit"):
        TraceSpec(time_unit="h")


@pytest.mark.shared_data
def test_cloudphysics_csv_and_oracle_give_the_same_windows(shared_data: Path) -> None:
    d = shared_data / "cloudphysics"
    csv = read_trace(d / "cloudPhysicsIO.csv", spec=TraceSpec(columns="ts=time,op=op,size=size,key=lbn"))
    ora = read_trace(d / "cloudPhysicsIO.oracleGeneral.bin", fmt="oracle")
    fc = window_frame(csv, window_s=60.0)
    fo = window_frame(ora, window_s=60.0)
    assert len(fc) == len(fo) > 100
    requests_c = fc["reads"] + fc["writes"]
    np.testing.assert_array_equal(requests_c, fo["reads"])
    for col in ("start", "active_keys", "keyspace_size", "topk_share", "entropy"):
        np.testing.assert_allclose(fc[col], fo[col], err_msg=col)
    assert fc["writes"].sum() == 66_898  # op 2a
    assert fc["reads"].sum() == 46_974  # op 28
