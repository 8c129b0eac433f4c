"""Rescaling a real Redis Cluster: regimetune's Pufferscale plans against ``redis-cli
--cluster``, the tool Redis operators use.

A local cluster whose slots are skewed in bytes and in load (hash tags: 40 slots hold large
values, another 40 slots take most requests), ``--keys`` keys of 1-4 KiB (8-16 KiB on the
heavy tags). ``--skew`` places the heavy tags:

- ``one`` (default): in the first eighth of the slot range, so the first master holds 2.4x
  the mean bytes. ``rebalance`` then hands most of them to one new node, and leaves that
  node at about 2.4x the new mean and the first master at about 1.6x, with the other four
  masters equal;
- ``ends``: half in the first and half in the last eighth, so two masters are heavy, one at
  each end of the range; ``rebalance`` moves the first one's (its lowest slots) and none
  of the last one's.

Two operations, each on a fresh cluster with the same keys:

- commission 4 -> 6: ``redis-cli --cluster add-node`` twice and ``rebalance
  --cluster-use-empty-masters`` (method ``rebalance``) against regimetune with the presets
  L, LT, DT, LDT and the ``tuned`` weights;
- decommission 6 -> 5: ``rebalance --cluster-weight NODE=0`` and ``del-node`` against the
  same.

A separate client process reads (80 %) and writes (20 %) keys drawn from the load
distribution through a cluster client while the cluster moves; it counts the errors it sees
and remembers what it wrote, so the keys are checked against the values they should hold
afterwards. Redirections it follows are not errors: redis-py's client, with one addition a
well-behaved cluster client has (an ASK to a node it does not know yet is followed, the node
learnt; redis/redis-py#2432), counted apart. Load per slot is the client's own request share
(Redis 7.0 keeps no per-slot load). The ``tuned`` weights come from the tuner's campaign
search on this cluster's per-slot bytes and load (4-6 servers).

For each: the largest master's bytes (measured by the Lua scan after the move) and load over
the mean, bytes and slots moved, wall time of the whole operation (joining nodes included),
keys lost, client errors; and the least bytes any plan must move to leave every master within
1.10x (and 1.00x) the mean bytes, with the bytes moved over the first of these. For
regimetune, the move's time predicted by the cost model of a slot move (fitted to batches
timed on a scratch cluster with the same keys, before the runs) stands beside the measured
one, and the planner's Eq. 3 at ``--net-bandwidth`` (bytes over bandwidth). Ratios are to
``rebalance`` in the same run.

    nice .venv/bin/python bench/redis_rescale.py --keys 40000

The last line is JSON: {"commission": {METHOD: {...}}, "decommission": {METHOD: {...}},
"move_costs": {...}}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from regimetune.backend import load_settings
from regimetune.backend.redis_cluster import RedisClusterRescaler, RedisStateStore
from regimetune.backend.redis_cluster.costs import DEFAULT_COSTS, MoveCosts, calibrate
from regimetune.backend.redis_cluster.local import LocalCluster, LocalRedis
from regimetune.backend.redis_cluster.membership import node_id, wait_converged
from regimetune.backend.redis_cluster.topology import SLOTS
from regimetune.models import PRESETS, PufferscaleWeights, RescaleOperation

METHODS = ("rebalance", "L", "LT", "DT", "LDT", "tuned")


# -- the workload ------------------------------------------------------------------------------
def tags_in(lo: int, hi: int, prefix: str, count: int) -> list[str]:
    """``count`` hash tags ``prefix<n>`` whose slots lie in [lo, hi)."""
    from redis.crc import key_slot

    out: list[str] = []
    n = 0
    while len(out) < count:
        tag = f"{prefix}{n}"
        if lo <= key_slot(tag.encode()) < hi:
            out.append(tag)
        n += 1
    return out


SKEWS = ("one", "ends")


def make_keys(n: int, seed: int, skew: str = "one") -> tuple[list[str], np.ndarray, np.ndarray]:
    """Key names, value sizes and access weights: 15 % of the keys on 40 'big' tags (8-16 KiB
    values) whose slots lie in the first eighth of the slot range (``skew="one"``), or half
    there and half in the last eighth (``"ends"``), 10 % on 40 'hot' tags spread over all
    slots (small values, most requests), the rest spread."""
    rng = np.random.default_rng(seed)
    if skew == "one":
        big = tags_in(0, 2048, "big", 40)
    else:
        big = tags_in(0, 2048, "big", 20) + tags_in(14336, 16384, "big", 20)
    hot = tags_in(0, 16384, "hot", 40)
    kind = rng.choice(3, size=n, p=[0.15, 0.10, 0.75])
    names, sizes, weight = [], np.empty(n, np.int64), np.empty(n)
    for i in range(n):
        if kind[i] == 0:
            names.append(f"{{{big[rng.integers(0, len(big))]}}}:{i}")
            sizes[i] = rng.integers(8192, 16384)
            weight[i] = 1.0
        elif kind[i] == 1:
            names.append(f"{{{hot[rng.integers(0, len(hot))]}}}:{i}")
            sizes[i] = rng.integers(512, 1024)
            weight[i] = 12.0
        else:
            names.append(f"k:{i}")
            sizes[i] = rng.integers(1024, 4096)
            weight[i] = 1.0
    return names, sizes, weight / weight.sum()


def value(key: str, size: int, version: int) -> bytes:
    head = f"{key}#{version}#".encode()
    return head + b"v" * max(0, size - len(head))


def key_slots(names: list[str]) -> np.ndarray:
    from redis.crc import key_slot

    return np.array([key_slot(k.encode()) for k in names], np.int64)


def fill(port: int, names: list[str], sizes: np.ndarray) -> None:
    import redis

    rc = redis.RedisCluster(host="127.0.0.1", port=port)
    for a in range(0, len(names), 2000):
        pipe = rc.pipeline()
        for k in range(a, min(a + 2000, len(names))):
            pipe.set(names[k], value(names[k], int(sizes[k]), 0))
        pipe.execute()
    rc.close()


def asking_cluster(port: int) -> Any:
    """A redis-py cluster client that follows an ASK to a node it does not know yet, as the
    cluster specification asks of a client: a node that holds no slot is in no ``CLUSTER
    SLOTS`` reply, so while it imports its first slot redis-py finds no node for the ASK
    and fails (redis/redis-py#2432). This one adds the node to its cache on demand (as a
    MOVED would), sends ``ASKING`` and the command there, and counts in
    ``asks_to_new_nodes`` the nodes it learnt that way."""
    import redis
    from redis.cluster import PRIMARY, ClusterNode

    class AskingCluster(redis.RedisCluster):  # type: ignore[misc]
        asks_to_new_nodes = 0

        def get_node(
            self, host: str | None = None, port: int | None = None, node_name: str | None = None
        ) -> Any:
            node = super().get_node(host, port, node_name)
            if node is None and host is not None and port is not None:
                node = ClusterNode(host, port, server_type=PRIMARY)
                self.nodes_manager.nodes_cache[node.name] = node
                self.asks_to_new_nodes += 1
            return node

    return AskingCluster(host="127.0.0.1", port=port)


def client_loop(
    port: int, names: list[str], sizes: np.ndarray, probs: np.ndarray, stop: Any, out: Any
) -> None:
    """Reads and writes until ``stop``; puts (ops, errors, {key index: last version}, {key
    index: versions whose write failed}, ASKs followed to nodes the client did not know)
    on ``out``."""
    rc = asking_cluster(port)
    rng = np.random.default_rng(7)
    ops = 0
    errors: dict[str, int] = {}
    written: dict[int, int] = {}
    uncertain: dict[int, list[int]] = {}
    version = 0
    while not stop.is_set():
        for i in rng.choice(len(names), size=200, p=probs):
            i = int(i)
            try:
                if rng.random() < 0.2:
                    version += 1
                    try:
                        rc.set(names[i], value(names[i], int(sizes[i]), version))
                    except Exception:
                        uncertain.setdefault(i, []).append(version)
                        raise
                    written[i] = version
                else:
                    rc.get(names[i])
            except Exception as exc:
                what = f"{type(exc).__name__}: {str(exc)[:60]}"
                errors[what] = errors.get(what, 0) + 1
            ops += 1
    rc.close()
    out.put((ops, errors, written, uncertain, rc.asks_to_new_nodes))


def lost_keys(
    port: int, names: list[str], sizes: np.ndarray, written: dict[int, int], uncertain: dict[int, list[int]]
) -> int:
    import redis

    rc = redis.RedisCluster(host="127.0.0.1", port=port)
    lost = 0
    for a in range(0, len(names), 2000):
        idx = range(a, min(a + 2000, len(names)))
        got = rc.mget_nonatomic([names[k] for k in idx])
        for k, v in zip(idx, got, strict=True):
            ok = {value(names[k], int(sizes[k]), written.get(k, 0))}
            ok |= {value(names[k], int(sizes[k]), u) for u in uncertain.get(k, [])}
            if v not in ok:
                lost += 1
    rc.close()
    return lost


def bytes_floors(before: Any, leaving: str | None, joining: int) -> dict[str, float]:
    """The least bytes any plan moves to leave every master within 1.10x, and within 1.00x,
    the mean bytes: what masters hold above that, and all a leaving master holds."""
    per: dict[str, float] = {n.id: 0.0 for n in before.topo.masters}
    for s, nid in before.topo.slot_owners().items():
        per[nid] += float(before.stats.bytes[s])
    gone = {n.id for n in before.topo.masters if n.address == leaving}
    mean = sum(per.values()) / (len(per) - len(gone) + joining)
    out = {}
    for name, x in (("bytes_floor_1_10", 1.10), ("bytes_floor_1_00", 1.0)):
        out[name] = sum(b if nid in gone else max(0.0, b - x * mean) for nid, b in per.items())
    return out


# -- one run -------------------------------------------------------------------------------------
def redis_cli(*args: str) -> str:
    out = subprocess.run(["redis-cli", "--cluster", *args], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0 or "[ERR]" in out.stdout:
        raise RuntimeError(f"redis-cli --cluster {args[0]} failed: {out.stdout[-800:]} {out.stderr[-500:]}")
    return out.stdout


def run(
    kind: str, method: str, weights: PufferscaleWeights | None, args: argparse.Namespace, work: dict[str, Any]
) -> dict[str, Any]:
    names, sizes, probs, slot_load = work["names"], work["sizes"], work["probs"], work["slot_load"]
    masters = 4 if kind == "commission" else 6
    spares = 2 if kind == "commission" else 0
    with LocalCluster(masters, spares=spares) as lc, tempfile.TemporaryDirectory() as tmp:
        fill(lc.masters[0].port, names, sizes)
        settings = load_settings(state=Path(tmp) / "b.db", net_bandwidth=args.net_bandwidth)
        rescaler = RedisClusterRescaler(
            lc.address,
            RedisStateStore(settings.state),
            spares=[s.address for s in lc.spares],
            key_batch=args.key_batch,
            costs=work["costs"],
        )
        before = rescaler.snapshot(client_load=slot_load)
        owners_before = before.topo.slot_owners()
        leaving = lc.masters[-1]
        floors = bytes_floors(before, leaving.address if kind == "decommission" else None, len(lc.spares))
        leaving_id = next(n.id for n in before.topo.nodes.values() if n.address == leaving.address)
        entry = lc.masters[0]
        stop, out = mp.Event(), mp.Queue()
        client = mp.Process(
            target=client_loop, args=(entry.port, names, sizes, probs, stop, out), daemon=True
        )
        client.start()
        time.sleep(0.5)
        extra: dict[str, Any] = {}
        t0 = time.perf_counter()
        if method == "rebalance":
            if kind == "commission":
                known = {n.id for n in before.topo.nodes.values()}
                for s in lc.spares:
                    redis_cli("add-node", s.address, entry.address)
                    # as regimetune does: go on only once every node knows the new one
                    # (add-node checks that the nodes agree, and the next one would fail)
                    known.add(node_id(rescaler.conns, s.address))
                    wait_converged(rescaler.conns, entry.address, known)
                redis_cli("rebalance", entry.address, "--cluster-use-empty-masters")
            else:
                redis_cli("rebalance", entry.address, "--cluster-weight", f"{leaving_id}=0")
                redis_cli("del-node", entry.address, leaving_id)
        else:
            assert weights is not None
            op = (
                RescaleOperation(kind="commission", count=2)
                if kind == "commission"
                else RescaleOperation(kind="decommission", servers=[before.servers[leaving_id]])
            )
            planned = rescaler.plan(op, weights, settings, client_load=slot_load)
            t_move = time.perf_counter()
            done = rescaler.execute(planned)
            extra = {
                "predicted_s": done.predicted_s,
                "moves_s": done.moves_s,
                "predicted_eq3_s": planned.plan.metrics.t_max,
                "execute_s": time.perf_counter() - t_move,
                "plan_s": t_move - t0,
                "predicted_max_bytes_over_mean": planned.plan.metrics.d_max / planned.plan.metrics.d_target,
                "predicted_max_load_over_mean": planned.plan.metrics.l_max / planned.plan.metrics.l_target,
                "keys_moved": done.keys_moved,
            }
        wall = time.perf_counter() - t0
        time.sleep(0.3)
        stop.set()
        ops, errors, written, uncertain, asks_to_new = out.get(timeout=120)
        client.join(30)
        seed = next(m for m in lc.masters if m is not leaving or kind == "commission")
        after = RedisClusterRescaler(seed.address, RedisStateStore(Path(tmp) / "after.db")).snapshot(
            client_load=slot_load, healthy=False
        )
        owners_after = after.topo.slot_owners()
        moved = [s for s in range(SLOTS) if owners_before.get(s) != owners_after.get(s)]
        per_bytes: dict[str, float] = {n.id: 0.0 for n in after.topo.masters}
        per_load: dict[str, float] = dict.fromkeys(per_bytes, 0.0)
        for s, nid in owners_after.items():
            per_bytes[nid] += float(after.stats.bytes[s])
            per_load[nid] += float(slot_load[s])
        mean_bytes = sum(per_bytes.values()) / len(per_bytes)
        row = {
            "max_bytes_over_mean": max(per_bytes.values()) / mean_bytes,
            "max_load_over_mean": max(per_load.values()) * len(per_load) / sum(per_load.values()),
            "bytes_over_mean": sorted((round(b / mean_bytes, 2) for b in per_bytes.values()), reverse=True),
            "bytes_moved": float(before.stats.bytes[moved].sum()),
            "slots_moved": len(moved),
            "wall_s": wall,
            "keys_lost": lost_keys(seed.port, names, sizes, written, uncertain),
            "client_errors": sum(errors.values()),
            "client_error_kinds": errors,
            "client_ops": ops,
            "client_asks_to_new_nodes": asks_to_new,
            "masters_after": len(per_bytes),
            **floors,
            **extra,
        }
        rescaler.close()
        return row


def move_costs(names: list[str], sizes: np.ndarray, key_batch: int) -> MoveCosts:
    """The cost model of slot moves, fitted to batches timed on a scratch cluster of four
    masters holding the same keys (one-way moves: see costs.calibrate)."""
    with LocalCluster(4) as lc, tempfile.TemporaryDirectory() as tmp:
        fill(lc.masters[0].port, names, sizes)
        r = RedisClusterRescaler(lc.address, RedisStateStore(Path(tmp) / "c.db"))
        snap = r.snapshot()
        timings = calibrate(r.conns, snap.topo, snap.stats, key_batch=key_batch)
        r.close()
    return MoveCosts.fit(timings, DEFAULT_COSTS)


def tuned_weights(work: dict[str, Any], args: argparse.Namespace) -> tuple[PufferscaleWeights, str]:
    """The tuner's campaign search over this cluster's per-slot bytes and load."""
    from regimetune.tuner.config import RescaleConfig
    from regimetune.tuner.rescale.campaign import CampaignSpec
    from regimetune.tuner.rescale.tuning import tune_campaign

    campaign = CampaignSpec(
        n_buckets=SLOTS,
        load_series=work["slot_load"],
        size_series=work["slot_bytes"],
        min_servers=4,
        max_servers=6,
        warmup=2,
        operations=6,
        net_bandwidth=args.net_bandwidth,
    )
    config = RescaleConfig(
        budget=args.tune_budget, n_seeds=3, min_servers=4, max_servers=6, warmup=2, operations=6
    )
    rep = tune_campaign(campaign, config, n_held_out=3)
    return rep.weights, rep.reason


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=40_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skew", choices=SKEWS, default="one", help="where the heavy slots lie")
    ap.add_argument("--key-batch", type=int, default=200, help="keys per MIGRATE (regimetune)")
    ap.add_argument("--net-bandwidth", type=float, default=1.25e9, help="S_net of the planner, bytes/s")
    ap.add_argument("--tune-budget", type=int, default=12)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--kinds", default="commission,decommission")
    args = ap.parse_args()
    if not LocalRedis.available():
        sys.exit("redis-server is not installed")
    names, sizes, probs = make_keys(args.keys, args.seed, args.skew)
    slots = key_slots(names)
    slot_load = np.bincount(slots, weights=probs, minlength=SLOTS) * 1e6  # requests per million
    slot_bytes = np.bincount(slots, weights=sizes.astype(float), minlength=SLOTS)
    work = {"names": names, "sizes": sizes, "probs": probs, "slot_load": slot_load, "slot_bytes": slot_bytes}
    print(
        f"{len(names)} keys, {sizes.sum() / 2**20:.0f} MiB of values; largest slot {slot_bytes.max() / sizes.sum():.1%} "
        f"of the bytes, hottest slot {slot_load.max() / slot_load.sum():.1%} of the load; heavy slots: {args.skew}",
        flush=True,
    )
    t = time.perf_counter()
    work["costs"] = move_costs(names, sizes, args.key_batch)
    print(
        f"move costs calibrated on a scratch cluster ({time.perf_counter() - t:.0f} s): {work['costs']}",
        flush=True,
    )
    methods = args.methods.split(",")
    weights: dict[str, PufferscaleWeights | None] = {"rebalance": None, **{k: v for k, v in PRESETS.items()}}
    if "tuned" in methods:
        t = time.perf_counter()
        weights["tuned"], reason = tuned_weights(work, args)
        w = weights["tuned"]
        assert w is not None
        print(
            f"tuned weights W_L={w.w_load:.3g} W_D={w.w_data:.3g} W_T={w.w_time:.3g} ({reason}; {time.perf_counter() - t:.0f} s)"
        )
    result: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in args.kinds.split(","):
        result[kind] = {}
        for method in methods:
            row = run(kind, method, weights[method], args, work)
            result[kind][method] = row
            pred = (
                f", moves predicted {row['predicted_s']:.2f} s, measured {row['moves_s']:.2f} s "
                f"(Eq. 3: {row['predicted_eq3_s']:.3f} s)"
                if "predicted_s" in row
                else ""
            )
            print(
                f"{kind:12s} {method:9s} bytes max/mean {row['max_bytes_over_mean']:.3f}  load max/mean "
                f"{row['max_load_over_mean']:.3f}  moved {row['bytes_moved'] / 2**20:7.1f} MiB in "
                f"{row['slots_moved']:5d} slots  {row['wall_s']:6.2f} s  lost {row['keys_lost']}  "
                f"client errors {row['client_errors']}/{row['client_ops']} "
                f"(new nodes learnt from ASK {row['client_asks_to_new_nodes']}){pred}; "
                f"masters' bytes over the mean {row['bytes_over_mean']}",
                flush=True,
            )
        floors = next(iter(result[kind].values()))
        print(
            f"{kind}: any plan moves at least {floors['bytes_floor_1_10'] / 2**20:.1f} MiB to leave every master "
            f"within 1.10x the mean bytes, {floors['bytes_floor_1_00'] / 2**20:.1f} MiB within 1.00x",
            flush=True,
        )
        for row in result[kind].values():  # what balance costs at the least, against what was moved
            floor = row["bytes_floor_1_10"]
            row["bytes_moved_vs_floor_1_10"] = row["bytes_moved"] / floor if floor else None
        base = result[kind].get("rebalance")
        if base:
            for row in result[kind].values():
                row["bytes_moved_vs_rebalance"] = (
                    row["bytes_moved"] / base["bytes_moved"] if base["bytes_moved"] else None
                )
                row["wall_vs_rebalance"] = row["wall_s"] / base["wall_s"]
    result["move_costs"] = dataclasses.asdict(work["costs"])  # type: ignore[assignment]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
