"""The dashboard, loaded in headless Chromium (Debian's package; skipped where absent) from a
real service on 127.0.0.1 that has ingested a four-regime run and finished a cache and a
rescale tuning job (with a third still running): each chart is checked by the data it plots
(the SVG elements drawn for the windows and weights the API returns, on a time axis relative
to the first window; a zoomed view draws only its windows) and each table by its rows."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from regimetune.api import create_app
from regimetune.cli.demo import free_port
from regimetune.client.ingest import WindowCounts
from regimetune.push import RecordingBackend

from .conftest import AUTH, READ_TOKEN, settings_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
)
RUNNING_DONE, RUNNING_BUDGET = 3, 10
PRESETS = 4  # the presets a rescale job scores in every regime besides its budget
#: The tuned cache policy as the stub's cache job simulated it (``report["best"]``).
SIMULATED = {"hit_ratio": 0.9123, "hit_ratio_vs_unlimited": 0.97, "mean_bytes": 12_345_678.0,
             "memory_fraction": 0.071, "peak_bytes": 20_500_000.0, "feasible": True}  # fmt: skip
CACHE_SCORE, RESCALE_SCORE = 8.745, 0.07164
EPOCH = 1_700_000_000.0  # the run's clock starts here: the page shows times after its first window


def weights_of(regime: int) -> dict[str, float]:
    """Valid weights (max(W_L, W_D) = 1), none of W_D, W_T at the LDT preset's 1."""
    return {"w_load": 1.0, "w_data": 0.4 + 0.15 * regime, "w_time": 0.3 + 0.5 * regime}


def limit_of(regime: int) -> int:
    return 1000 * (regime + 1)


class StubRunner:
    """Stands for the tuner (its results are known, so the page can be checked against them):
    a cache job sets ``limit_of`` per regime, a rescale job ``weights_of``; a trace named
    ``slow.csv`` checkpoints a few evaluations and runs until released."""

    def __init__(self) -> None:
        self.regimes: list[int] = []
        self.release = threading.Event()

    def __call__(self, trace: str, objective: str, budget: int, optimizer: str, **kw: Any) -> dict[str, Any]:
        if Path(trace).name == "slow.csv":
            Path(kw["checkpoint"]).write_text('{"params": {"x": 1.0}, "value": 1.0}\n' * RUNNING_DONE)
            self.release.wait(60)
        if objective == "cache":
            regimes = {
                r: {
                    "cache": {"mode": "lru", "limit_keys": limit_of(r)},
                    "source": "tuned",
                    "score": CACHE_SCORE,
                }
                for r in self.regimes
            }
            report: dict[str, Any] = {"n_evaluations": budget, "best_value": CACHE_SCORE, "best": SIMULATED}
        else:  # as a rescale tuning reports it: each regime and the default (-1) searched and scored
            regimes = {
                r: {"weights": weights_of(r), "source": "tuned", "score": RESCALE_SCORE} for r in self.regimes
            }
            per_regime = {str(r): {"evaluations": budget + PRESETS} for r in [-1, *self.regimes]}
            report = {
                "n_evaluations": (budget + PRESETS) * len(per_regime),
                "budget": budget,
                "best_value": RESCALE_SCORE,
                "regimes": per_regime,
            }
        return {"policy_file": {"regimes": regimes}, "report": report}


@dataclass
class Served:
    url: str
    windows: list[dict[str, Any]]
    regimes: list[int]
    jobs: dict[str, dict[str, Any]]
    status: dict[str, Any]
    backend: RecordingBackend
    doms: dict[str, str] = field(default_factory=dict)

    def dom(self, query: str = "") -> str:
        """The page's DOM once its first refresh is drawn (cached per query)."""
        if query not in self.doms:
            self.doms[query] = render(f"{self.url}/dashboard?token={READ_TOKEN}{query}")
        return self.doms[query]


def applied_and_delivered(status: dict[str, Any]) -> bool:
    """Whether the desired policy carries both tuning jobs' results and the backend has it."""
    d = status["desired"]
    if d is None or status["pending"] or status["delivered_version"] != d["version"]:
        return False
    policy, regime = d["policy"], d["policy"]["regime_id"]
    weights = {k: policy["weights"][k] for k in ("w_load", "w_data", "w_time")}
    return bool(
        weights == pytest.approx(weights_of(regime)) and policy["cache"]["limit_keys"] == limit_of(regime)
    )


def changes_of(url: str) -> list[dict[str, Any]]:
    """The decisions that changed the regime with the window each began at, oldest first."""
    with httpx.Client(base_url=url, headers=AUTH, timeout=30) as http:
        decisions = http.get("/v1/decisions", params={"limit": 100}).json()["items"][::-1]
    return [d for d in decisions if d["regime_from"] != d["regime_to"] and "at_window" in d["inputs"]]


def began_at(changes: list[dict[str, Any]]) -> dict[int, int]:
    """Each window between a change's start and its confirmation, and the regime that began
    there; where two changes' spans overlap, the later one's regime."""
    out: dict[int, int] = {}
    for d in changes:
        for i in range(int(d["inputs"]["at_window"]), int(d["inputs"]["window"])):
            out[i] = d["regime_to"]
    return out


def render(url: str) -> str:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1200",
         "--virtual-time-budget=8000", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
         "--dump-dom", url],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip


def wait_job(http: httpx.Client, job_id: str) -> dict[str, Any]:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        job = http.get(f"/v1/tuning-jobs/{job_id}").json()
        if job["status"] not in ("pending", "running"):
            return dict(job)
        time.sleep(0.05)
    raise AssertionError(f"tuning job {job_id} did not finish")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, workload: list[WindowCounts]) -> Iterator[Served]:
    import uvicorn

    tmp = tmp_path_factory.mktemp("dashboard")
    for name in ("run.csv", "slow.csv"):
        (tmp / name).write_text("ts,op,size,key\n")
    runner = StubRunner()
    settings = settings_for(tmp, tuning={"executor": "thread", "max_workers": 3, "trace_dirs": [str(tmp)]})
    backend = RecordingBackend()
    app = create_app(settings, backend=backend, jobs_runner=runner)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 30
    while not server.started and time.monotonic() < end:
        time.sleep(0.05)
    assert server.started
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=30) as http:
            for wc in workload:
                counts = {"keys": wc.keys.tolist(), "reads": wc.reads.tolist(), "writes": wc.writes.tolist()}
                r = http.post("/v1/ingest", json={"window_start": EPOCH + wc.start, "counts": counts})
                assert r.status_code == 200, r.text
            windows = http.get("/v1/windows", params={"limit": 5000}).json()
            runner.regimes = sorted({w["regime_id"] for w in windows if w["regime_id"] is not None})
            jobs = {}
            for objective in ("cache", "rescale"):  # one after the other: each keeps the other half
                body = {"trace": str(tmp / "run.csv"), "objective": objective, "budget": 6, "apply": True}
                jobs[objective] = wait_job(http, http.post("/v1/tuning-jobs", json=body).json()["id"])
                assert jobs[objective]["status"] == "succeeded", jobs[objective]["error"]
            body = {"trace": str(tmp / "slow.csv"), "budget": RUNNING_BUDGET}
            jobs["running"] = http.post("/v1/tuning-jobs", json=body).json()
            # a job is "succeeded" once recorded, and applied just after: wait for both halves
            # of the regime in force's tuned policy to be made and delivered
            end = time.monotonic() + 10
            status = http.get("/v1/policy/status").json()
            while not applied_and_delivered(status) and time.monotonic() < end:
                time.sleep(0.05)
                status = http.get("/v1/policy/status").json()
            assert applied_and_delivered(status), status
        yield Served(url, windows, runner.regimes, jobs, status, backend)
    finally:
        runner.release.set()
        server.should_exit = True
        thread.join(10)


class Page(HTMLParser):
    """The elements of a DOM dump: every start tag with its attributes, and the rows (cell
    texts) of every table by its id."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.texts: dict[str, list[str]] = {}  # class -> texts of <text> elements with that class
        self._table: str | None = None
        self._in_body = False
        self._cell: list[str] | None = None
        self._text_class: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.elements.append((tag, a))
        if tag == "table":
            self._table = a.get("id")
        elif tag == "tbody" and self._table is not None:
            self._in_body = True
        elif tag == "tr" and self._in_body and self._table is not None:
            self.tables.setdefault(self._table, []).append([])
        elif tag in ("td", "th") and self._in_body:
            self._cell = []
        elif tag == "text":
            self._text_class = a.get("class")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table, self._in_body = None, False
        elif tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "text":
            self._text_class = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._text_class:
            self.texts.setdefault(self._text_class, []).append(data)

    def all(self, tag: str, cls: str) -> list[dict[str, str]]:
        return [a for t, a in self.elements if t == tag and cls in a.get("class", "").split()]


TIME = re.compile(r"^\+\d+:\d\d:\d\d$")


def test_the_timeline_draws_every_window_by_regime_on_a_time_axis_from_the_first_window(
    served: Served,
) -> None:
    page = Page(served.dom())
    bars = page.all("rect", "window-bar")
    assert [int(b["data-window"]) for b in bars] == [w["index"] for w in served.windows]
    for bar, w in zip(bars, served.windows, strict=True):
        assert bar["data-regime"] == ("" if w["regime_id"] is None else str(w["regime_id"]))
        assert float(bar["data-rate"]) == pytest.approx(w["requests"] / w["length"], abs=1e-3)
        assert float(bar["height"]) > 0 or w["requests"] == 0
    busiest = max(range(len(bars)), key=lambda i: float(bars[i]["data-rate"]))
    assert float(bars[busiest]["height"]) == max(float(b["height"]) for b in bars)
    top = max(float(t) for t in page.texts["y-tick"])  # the axis reaches over the busiest window
    assert float(bars[busiest]["data-rate"]) <= top < 2.5 * float(bars[busiest]["data-rate"])
    assert {b["data-regime"] for b in bars} >= {str(r) for r in served.regimes} and len(served.regimes) >= 3
    ticks = page.texts["x-tick"]
    assert ticks[0] == "+0:00:00" and all(TIME.match(t) for t in ticks), ticks
    span = served.windows[-1]["start"] + served.windows[-1]["length"] - served.windows[0]["start"]
    last = max(float(a["data-t"]) for a in page.all("text", "x-tick"))
    assert span / 2 < last <= span and len(ticks) >= 4
    xs = [float(b["x"]) for b in bars]
    assert xs == sorted(xs)  # later windows to the right
    assert page.all("line", "marker"), "no regime change marked on the timeline"


def test_a_zoomed_timeline_draws_only_the_windows_in_view(served: Served) -> None:
    t0 = served.windows[0]["start"]
    page = Page(served.dom("&from=1800&to=3600"))
    got = [int(b["data-window"]) for b in page.all("rect", "window-bar")]
    want = [
        w["index"] for w in served.windows if w["start"] - t0 + w["length"] > 1800 and w["start"] - t0 < 3600
    ]
    assert got == want and 0 < len(got) < len(served.windows) / 2
    ticks = [float(a["data-t"]) for a in page.all("text", "x-tick")]
    assert ticks and all(1800 <= t <= 3600 for t in ticks)
    assert "+0:30:00" in page.texts["x-tick"]


def test_each_change_is_drawn_where_it_began_and_where_it_was_confirmed(served: Served) -> None:
    """The windows between a change's start and its confirmation carry the live label (the
    old regime's policy ran) but are drawn, pale, in the colour of the regime that began (of
    the later one where a change began before the one before it was confirmed)."""
    changes = changes_of(served.url)
    late = [d for d in changes if d["inputs"]["at_window"] < d["inputs"]["window"]]
    assert changes and late, "no change confirmed after it began: nothing to tell apart"
    page = Page(served.dom())
    began = [int(a["data-window"]) for a in page.all("line", "began")]
    known = [int(a["data-window"]) for a in page.all("line", "confirmed")]
    assert sorted(began) == sorted(int(d["inputs"]["at_window"]) for d in changes)
    assert sorted(known) == sorted(int(d["inputs"]["window"]) for d in changes)
    bars = {int(b["data-window"]): b for b in page.all("rect", "window-bar")}
    pending = began_at(changes)
    for i, rid in pending.items():
        assert "pending" in bars[i]["class"].split() and bars[i]["data-began"] == str(rid)
    for d in late:
        a, w = int(d["inputs"]["at_window"]), int(d["inputs"]["window"])
        for i in range(a, w):
            assert bars[i]["data-regime"] != str(d["regime_to"])  # live, the old regime held
        assert bars[w]["data-regime"] == str(d["regime_to"])
        assert ("pending" in bars[w]["class"].split()) == (w in pending)
        assert float(bars[a]["x"]) < float(bars[w]["x"])
    assert sum("pending" in b["class"].split() for b in bars.values()) == len(pending)
    last = max(changes, key=lambda d: d["id"])
    since = re.search(r'<div id="since">(.*?)</div>', served.dom())
    assert since and f"(window {int(last['inputs']['at_window'])}), known at" in since.group(1)
    assert f"(window {int(last['inputs']['window'])})" in since.group(1)


def test_the_policy_in_force_shows_its_hit_ratio_and_memory(served: Served) -> None:
    dom = served.dom()
    page = Page(dom)
    rows = {r[0]: r[1] for r in page.tables["in-force"]}
    desired = served.status["desired"]
    assert rows["version"] == f"v{desired['version']} (regime {desired['policy']['regime_id']}, tuned)"
    assert rows["hit ratio"] == "0.9123 (97.0 % of the unlimited cache's)"
    assert rows["memory (time avg)"] == "12.3 MB (7.1 % of the unlimited cache's)"
    assert rows["memory (peak)"] == "20.5 MB"
    assert re.search(r'<span id="hit-ratio">0\.912</span>', dom) and '<span id="memory">12.3 MB</span>' in dom
    assert f"as simulated by tuning job {served.jobs['cache']['id'][:8]}" in dom


def test_the_time_range_picker_follows_the_newest_windows(served: Served) -> None:
    end = served.windows[-1]["start"] + served.windows[-1]["length"] - served.windows[0]["start"]
    page = Page(served.dom("&last=3600"))
    got = [int(b["data-window"]) for b in page.all("rect", "window-bar")]
    t0 = served.windows[0]["start"]
    want = [w["index"] for w in served.windows if w["start"] - t0 + w["length"] > end - 3600]
    assert got == want and 0 < len(got) < len(served.windows)


def test_per_regime_policies_show_both_tuned_halves_in_the_chart_and_the_table(served: Served) -> None:
    page = Page(served.dom())
    bars = page.all("rect", "weight-bar")
    drawn = {(int(b["data-regime"]), b["data-weight"]): float(b["data-value"]) for b in bars}
    want = {(r, k): v for r in served.regimes for k, v in weights_of(r).items()}
    assert len(bars) == 3 * len(served.regimes) and drawn == pytest.approx(want)
    assert all(float(b["height"]) > 0 for b in bars)
    rows = page.tables["policies"]
    assert [int(r[0]) for r in rows] == served.regimes
    for row, r in zip(rows, served.regimes, strict=True):
        w = weights_of(r)
        assert row[1:5] == ["tuned", "lru", f"{limit_of(r):,}", "-"]
        assert row[8] == f"{RESCALE_SCORE} campaign SSR"  # the rescale job set it last
        assert [float(x) for x in row[5:8]] == pytest.approx(
            [w["w_load"], w["w_data"], w["w_time"]], rel=1e-2
        )


def test_tuning_jobs_are_listed_with_their_progress(served: Served) -> None:
    page = Page(served.dom())
    rows = {r[0]: r for r in page.tables["jobs"]}
    cache, rescale, running = (served.jobs[k] for k in ("cache", "rescale", "running"))
    assert set(rows) == {j["id"][:8] for j in (cache, rescale, running)}
    assert rows[cache["id"][:8]][1:3] == ["cache", "succeeded"]
    assert rows[cache["id"][:8]][3] == "6 / 6"
    assert rows[cache["id"][:8]][4] == f"{CACHE_SCORE} objective"
    assert rows[rescale["id"][:8]][1:3] == ["rescale", "succeeded"]
    n = len(served.regimes)
    assert rows[rescale["id"][:8]][3] == (
        f"{10 * (n + 1)} evaluations: {n + 1} regimes ({n} + the default) \N{MULTIPLICATION SIGN} (6 searched + 4 presets)"
    )
    assert rows[rescale["id"][:8]][4] == f"{RESCALE_SCORE} campaign SSR"
    assert rows[running["id"][:8]][1:4] == ["cache", "running", f"{RUNNING_DONE} / {RUNNING_BUDGET}"]
    bars = [float(a["data-progress"]) for a in page.all("span", "bar")]
    assert sorted(bars) == pytest.approx([RUNNING_DONE / RUNNING_BUDGET, 1.0, 1.0])
    widths = re.findall(r'data-progress="0\.3"><div style="width:\s*([\d.]+)%', served.dom())
    assert widths == ["30.0"]


def test_desired_and_delivered_policies_side_by_side(served: Served) -> None:
    page = Page(served.dom())
    desired = served.status["desired"]
    assert served.status["delivered_version"] == desired["version"]  # the recording backend took it
    rows = {r[0]: r[1:] for r in page.tables["desired-delivered"]}
    v = f"v{desired['version']}"
    assert rows["version"] == [v, v]
    w = desired["policy"]["weights"]
    assert float(rows["W_D"][0]) == pytest.approx(w["w_data"], rel=1e-2) != 1.0
    assert float(rows["W_T"][0]) == pytest.approx(w["w_time"], rel=1e-2)
    assert rows["W_D"][0] == rows["W_D"][1] and rows["cache"][0] == rows["cache"][1]
    assert rows["cache"][0].startswith("lru n=")
    assert not page.all("td", "diff")  # nothing differs
    assert "the backend holds the desired policy" in served.dom()


def test_a_backend_behind_shows_what_it_holds_beside_what_is_desired(served: Served) -> None:
    """It leaves the backend down: the tests after it do not look at delivery."""
    before = served.status["desired"]
    served.backend.go_down()
    regime = before["policy"]["regime_id"]
    body = {
        "cache": {"mode": "lru", "limit_keys": 77},
        "weights": {"w_load": 0.5, "w_data": 1.0, "w_time": 2.0},
    }
    with httpx.Client(base_url=served.url, headers=AUTH, timeout=30) as http:
        assert http.put(f"/v1/policies/{regime}", json=body).status_code == 200
        status = http.get("/v1/policy/status").json()
    new = before["version"] + 1
    assert status["desired"]["version"] == new and status["delivered_version"] == before["version"]
    dom = served.dom("&behind")
    page = Page(dom)
    rows = {r[0]: r[1:] for r in page.tables["desired-delivered"]}
    assert rows["version"] == [f"v{new}", f"v{before['version']}"]
    assert rows["cache"] == ["lru n=77", f"lru n={before['policy']['cache']['limit_keys']:,}"]
    assert [rows[k][0] for k in ("W_L", "W_D", "W_T")] == ["0.5", "1", "2"]
    assert rows["source"] == ["operator", "tuned"]
    differ = {r[0] for r in page.tables["desired-delivered"]} - {"regime"}
    assert len(page.all("td", "diff")) == len(differ)
    assert f"backend behind: v{new} to deliver" in dom
    if status["last_error"]:  # the push worker tried and failed before the page was read
        assert f"last delivery error:</span> {status['last_error']}" in dom


class Browser:
    """A page in headless Chromium driven over the DevTools protocol (real mouse events)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.n = 0

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        import json

        self.n += 1
        await self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads(await self.ws.recv())
            if msg.get("id") == self.n:
                assert "error" not in msg, msg
                return dict(msg["result"])

    async def eval(self, expr: str) -> Any:
        r = await self.send("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        return r["result"].get("value")

    async def until(self, expr: str, timeout: float = 20.0) -> None:
        import asyncio

        end = time.monotonic() + timeout
        while not await self.eval(expr):
            assert time.monotonic() < end, f"timed out waiting for {expr}"
            await asyncio.sleep(0.1)

    async def mouse(self, kind: str, x: float, y: float, **extra: Any) -> None:
        await self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1, **extra)


def drive(url: str, script: Any, tmp: Path) -> Any:
    """Open ``url`` in headless Chromium and run ``script(browser)`` against it."""
    import asyncio

    websockets = pytest.importorskip("websockets.asyncio.client")
    assert CHROMIUM is not None
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1200",
         "--remote-debugging-port=0", f"--user-data-dir={tmp}", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
         "about:blank"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:
            if m := re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line):
                port = int(m.group(1))
                break
        assert port is not None, "chromium did not open its DevTools port"
        target = httpx.put(f"http://127.0.0.1:{port}/json/new?{url}").json()

        async def run() -> Any:
            async with websockets.connect(target["webSocketDebuggerUrl"], max_size=None) as ws:
                return await script(Browser(ws))

        return asyncio.run(run())
    finally:
        proc.terminate()
        proc.wait(10)


def test_dragging_across_the_timeline_zooms_in_and_show_all_zooms_back_out(
    served: Served, tmp_path: Path
) -> None:
    async def script(b: Browser) -> dict[str, Any]:
        await b.until("document.body.dataset.loaded === 'true'")
        bars = "document.querySelectorAll('#timeline rect.window-bar').length"
        out: dict[str, Any] = {"all": await b.eval(bars)}
        box = await b.eval("(() => { const r = document.getElementById('timeline').getBoundingClientRect();"
                           " return [r.left, r.top, r.width, r.height]; })()")  # fmt: skip
        left, top, width, height = box
        x0, x1, y = left + width * 0.3, left + width * 0.45, top + height / 2
        await b.mouse("mousePressed", x0, y)
        await b.mouse("mouseMoved", (x0 + x1) / 2, y)
        await b.mouse("mouseReleased", x1, y)
        out["zoomed"] = await b.eval(bars)
        out["search"] = await b.eval("location.search")
        out["ticks"] = await b.eval(
            "[...document.querySelectorAll('#timeline text.x-tick')].map((t) => t.textContent)"
        )
        await b.send(
            "Input.dispatchMouseEvent", type="mouseWheel", x=(x0 + x1) / 2, y=y, deltaX=0, deltaY=400
        )
        out["wheel_out"] = await b.eval(bars)
        await b.eval("document.getElementById('zoom-reset').click()")
        out["reset"] = await b.eval(bars)
        out["search_after"] = await b.eval("location.search")
        return out

    got = drive(f"{served.url}/dashboard?token={READ_TOKEN}", script, tmp_path)
    n = len(served.windows)
    assert got["all"] == n
    assert 0 < got["zoomed"] < n / 3, got  # about 15 % of the span was selected
    assert "from=" in got["search"] and "to=" in got["search"] and f"token={READ_TOKEN}" in got["search"]
    assert all(TIME.match(t) for t in got["ticks"]) and got["ticks"][0] != "+0:00:00"
    assert got["zoomed"] < got["wheel_out"] <= n  # the wheel zooms back out around the pointer
    assert got["reset"] == n and "from=" not in got["search_after"]


def test_the_time_range_picker_and_the_typed_range(served: Served, tmp_path: Path) -> None:
    async def script(b: Browser) -> dict[str, Any]:
        await b.until("document.body.dataset.loaded === 'true'")
        bars = "document.querySelectorAll('#timeline rect.window-bar').length"
        out: dict[str, Any] = {}
        await b.eval("(() => { const s = document.getElementById('range'); s.value = '600';"
                     " s.dispatchEvent(new Event('change')); })()")  # fmt: skip
        out["last"] = await b.eval(bars)
        out["last_search"] = await b.eval("location.search")
        await b.eval("document.getElementById('range-from').value = '+0:30:00';"
                     "document.getElementById('range-to').value = '1:00:00';"
                     "document.getElementById('range-apply').click()")  # fmt: skip
        out["typed"] = await b.eval(bars)
        out["typed_search"] = await b.eval("location.search")
        out["picker"] = await b.eval("document.getElementById('range').value")
        await b.eval("document.getElementById('range-from').value = 'soon';"
                     "document.getElementById('range-apply').click()")  # fmt: skip
        out["bad"] = await b.eval("document.getElementById('err').textContent")
        out["after_bad"] = await b.eval(bars)
        return out

    got = drive(f"{served.url}/dashboard?token={READ_TOKEN}", script, tmp_path)
    t0 = served.windows[0]["start"]
    end = served.windows[-1]["start"] + served.windows[-1]["length"] - t0
    in_last = [w for w in served.windows if w["start"] - t0 + w["length"] > end - 600]
    assert got["last"] == len(in_last) and "last=600" in got["last_search"]
    typed = [w for w in served.windows if w["start"] - t0 + w["length"] > 1800 and w["start"] - t0 < 3600]
    assert (
        got["typed"] == len(typed)
        and "from=1800.000" in got["typed_search"]
        and "last=" not in got["typed_search"]
    )
    assert got["picker"] == "custom"
    assert "+h:mm:ss" in got["bad"] and got["after_bad"] == len(typed)  # a bad range changes nothing


def test_delivery_errors_and_refused_versions_are_shown(served: Served, tmp_path: Path) -> None:
    """What ``GET /v1/policy/status`` reports of failed deliveries: its ``last_error`` and, where
    the service lists them, the versions the backend refused for good, with its reason."""
    status = {
        "desired": None,
        "delivered_version": 2,
        "pushing": True,
        "pending": [4],
        "last_error": "HTTP 503 <busy>",
    }
    show = (
        "(async (s) => { await renderStatus(s, []); return [document.getElementById('last-error').textContent,"
        " getComputedStyle(document.getElementById('refused')).display,"
        " [...document.querySelectorAll('#refused tbody tr')].map((r) => r.textContent)]; })"
    )

    async def script(b: Browser) -> list[Any]:
        import json

        await b.until("document.body.dataset.loaded === 'true'")
        refused = {**status, "refused": [{"version": 3, "reason": "limit_keys below the backend's floor"}]}
        return [await b.eval(f"{show}({json.dumps(s)})") for s in (status, refused)]

    without, with_refused = drive(f"{served.url}/dashboard?token={READ_TOKEN}", script, tmp_path)
    assert without == ["last delivery error: HTTP 503 <busy>", "none", []]
    assert with_refused[0] == without[0] and with_refused[1] != "none"
    assert with_refused[2] == ["v3limit_keys below the backend's floor"]


def test_the_dashboard_as_an_operator_sees_it(served: Served, screenshot: Callable[..., Path]) -> None:
    """The page in Chromium, kept as ``dashboard.png``: the timeline in the colour of every
    regime that holds a window past its confirmation (the windows before it are pale)."""
    from PIL import Image

    page = (resources.files("regimetune.api") / "static" / "index.html").read_text()
    found = re.search(r"const COLORS = \[(.*?)\];", page)
    assert found
    colors = re.findall(r'"(#[0-9a-f]{6})"', found.group(1))
    shot = screenshot(f"{served.url}/dashboard?token={READ_TOKEN}", "dashboard", height=1700)
    img = np.asarray(Image.open(shot).convert("RGB"))
    assert img.shape == (1700, 1400, 3)
    pending = began_at(changes_of(served.url))
    solid = sorted({w["regime_id"] for w in served.windows if w["index"] not in pending} - {None})
    assert len(solid) >= 2
    for r in solid:
        rgb = np.array([int(colors[r % len(colors)][i : i + 2], 16) for i in (1, 3, 5)])
        assert np.count_nonzero(np.all(np.abs(img.astype(int) - rgb) <= 12, axis=-1)) > 500, r
