"""String keys in every text reader (hashed with XXH3-64) and the Twitter and CacheLib presets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from typer.testing import CliRunner

from regimetune.cli.main import app
from regimetune.collectors import TraceSpec, read_trace, read_windows, window_frame
from regimetune.collectors.keys import hash_key, hash_keys
from regimetune.models import EventBatch, TraceFormatError


def _read(path: Path, **kw: object) -> EventBatch:
    return EventBatch.concat(list(read_trace(path, **kw)))  # type: ignore[arg-type]


def test_the_hash_is_xxh3_64_and_stable() -> None:
    # pinned values: a change here would silently renumber every key of every stored window
    assert hash_key("") == 0x2D06800538D394C2
    assert hash_key("a:b") == 0x35A5819DD7F7C459
    col = pa.array(["x", None, "x", "y"]).dictionary_encode()
    assert hash_keys(col).tolist() == [hash_key("x"), hash_key(""), hash_key("x"), hash_key("y")]
    assert hash_keys(pa.chunked_array([pa.array([b"x"]), pa.array([b"y"])])).tolist() == [
        hash_key("x"),
        hash_key("y"),
    ]


def _keys(n: int) -> list[str]:
    rng = np.random.default_rng(3)
    return [f"ns:{rng.integers(0, 300):x}:é{rng.integers(0, 9)}" for _ in range(n)]


def test_csv_string_keys_fast_and_slow_paths_agree(tmp_path: Path) -> None:
    keys = _keys(2000)
    lines = [f"{i * 0.01:.2f},{k},get" for i, k in enumerate(keys)]
    good = tmp_path / "s.csv"
    good.write_text("ts,key,op\n" + "\n".join(lines) + "\n")
    bad = tmp_path / "s_bad.csv"
    bad.write_text("ts,key,op\n" + "\n".join([*lines[:1000], "5.0,,get", *lines[1000:]]) + "\n")
    fast = _read(good, chunk_rows=256)
    reader = read_trace(bad, chunk_rows=256, skip_bad=1)  # the bad block is parsed line by line
    slow = EventBatch.concat(list(reader))
    assert reader.bad_records == 1
    assert fast.key.tolist() == slow.key.tolist() == [hash_key(k) for k in keys]


def test_auto_keys_decided_by_the_first_record(tmp_path: Path) -> None:
    p = tmp_path / "mixed.csv"
    p.write_text("ts,key,op\n1,42,get\n2,abc,get\n")
    with pytest.raises(TraceFormatError, match=r"mixed.csv:3: key 'abc' is not an integer \(keys are read"):
        _read(p)
    # numbers are hashed like any string once the keys are strings
    q = tmp_path / "s.csv"
    q.write_text("ts,key,op\n1,abc,get\n2,42,get\n")
    assert _read(q).key.tolist() == [hash_key("abc"), hash_key("42")]
    assert _read(p, spec=TraceSpec(key_type="string")).key.tolist() == [hash_key("42"), hash_key("abc")]


def test_jsonl_and_parquet_string_keys(tmp_path: Path) -> None:
    j = tmp_path / "s.jsonl"
    j.write_text('{"ts": 1, "key": "u:1", "op": "get"}\n{"ts": 2, "key": "u:2", "op": "set"}\n')
    assert _read(j).key.tolist() == [hash_key("u:1"), hash_key("u:2")]
    p = tmp_path / "s.parquet"
    pq.write_table(pa.table({"ts": [1.0, 2.0, 3.0], "key": ["u:1", "u:2", "u:1"]}), p)
    assert _read(p).key.tolist() == [hash_key("u:1"), hash_key("u:2"), hash_key("u:1")]


TWITTER = """\
0,nz:u:eeW511W3dcH3de3d15ec,26,200,1,get,0
0,nz:u:a,8,10,2,set,3600
1,nz:u:a,8,0,2,delete,0
2,nz:u:eeW511W3dcH3de3d15ec,26,200,1,gets,0
2,nz:u:a,8,10,2,incr,0
3,nz:u:b,8,10,2,cas,0
"""


def test_twitter_preset_maps_ops_and_skips_deletes(tmp_path: Path) -> None:
    p = tmp_path / "cluster52.0.zst"
    p.write_bytes(zstandard.ZstdCompressor().compress(TWITTER.encode()))
    reader = read_trace(p, fmt="twitter")
    b = EventBatch.concat(list(reader))
    assert b.ts.tolist() == [0, 0, 2, 2, 3]
    assert b.op.tolist() == [0, 1, 0, 1, 1]
    assert b.size.tolist() == [200, 10, 200, 10, 10]
    assert b.key.tolist()[:2] == [hash_key("nz:u:eeW511W3dcH3de3d15ec"), hash_key("nz:u:a")]
    assert reader.bad_records == 0 and "delete" in reader.notes[0]
    bad = tmp_path / "bad.0"
    bad.write_text(TWITTER + "4,nz:u:c,8,10,2,touch,0\n")
    with pytest.raises(TraceFormatError, match=r"bad.0:7: unknown op 'touch'"):
        _read(bad, fmt="twitter")


CACHELIB = """\
op_time,key,key_size,op,op_count,size,cache_hits,ttl
1000,k1,12,GET,2,100,1,
1500,k2,12,SET,1,50,0,60
2000,k1,12,DELETE,1,0,0,
2500,k1,12,GET_LEASE,3,100,1,
3000,k3,12,SET_LEASE,1,70,0,60
"""


def test_cachelib_preset_repeats_op_count_in_milliseconds(tmp_path: Path) -> None:
    p = tmp_path / "kvcache_traces_1.csv"
    p.write_text(CACHELIB)
    b = _read(p, fmt="cachelib")
    assert b.ts.tolist() == [1.0, 1.0, 1.5, 2.5, 2.5, 2.5, 3.0]
    assert b.op.tolist() == [0, 0, 1, 0, 0, 0, 1]
    assert b.key.tolist()[0] == hash_key("k1") and b.size.tolist()[2] == 50
    # an option given with a preset overrides it
    assert _read(p, fmt="cachelib", spec=TraceSpec(time_unit="us")).ts.tolist()[0] == 0.001
    zero = tmp_path / "zero.csv"
    zero.write_text(CACHELIB + "3500,k4,12,GET,0,10,0,\n")
    with pytest.raises(TraceFormatError, match=r"zero.csv:7: count 0 is out of range"):
        _read(zero, fmt="cachelib")
    no_time = tmp_path / "old.csv"
    no_time.write_text("key,op,size,op_count,key_size\nk1,GET,10,1,2\n")
    with pytest.raises(TraceFormatError, match="which column is 'ts'"):
        _read(no_time, fmt="cachelib")


def test_twitter_windows_match_a_generic_csv_of_the_same_requests(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    n = 20_000
    ts = np.sort(rng.integers(0, 600, n))
    keys = [f"tw:{k:x}" for k in rng.zipf(1.3, n) % 5000]
    ops = np.where(rng.random(n) < 0.8, "get", "set")
    tw = tmp_path / "tw.0"
    tw.write_text("".join(f"{t},{k},5,100,1,{o},0\n" for t, k, o in zip(ts, keys, ops, strict=True)))
    generic = tmp_path / "g.csv"
    generic.write_text(
        "ts,key,op\n" + "".join(f"{t},{hash_key(k)},{o}\n" for t, k, o in zip(ts, keys, ops, strict=True))
    )
    a = window_frame(read_trace(tw, fmt="twitter", chunk_rows=4096), window_s=60.0)
    b = window_frame(read_trace(generic), window_s=60.0)
    for col in ("reads", "writes", "active_keys", "keyspace_size", "entropy"):
        np.testing.assert_array_equal(a[col], b[col], err_msg=col)


def test_cli_windows_accepts_the_presets_and_says_what_oracle_lacks(tmp_path: Path) -> None:
    p = tmp_path / "kv.csv"
    p.write_text(CACHELIB)
    out = tmp_path / "w.csv"
    r = CliRunner().invoke(
        app, ["windows", str(p), "--format", "cachelib", "--window", "1", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    w = read_windows(out)
    assert w["reads"].tolist() == [2, 3, 0] and w["writes"].tolist() == [1, 0, 1]
    o = tmp_path / "t.oracleGeneral.bin"
    from regimetune.collectors import write_events

    write_events([EventBatch.from_columns(ts=[1.0, 2.0], key=[1, 2], op=[0, 1])], o)
    r = CliRunner().invoke(app, ["windows", str(o)])
    assert r.exit_code == 0 and "no op column" in r.output
