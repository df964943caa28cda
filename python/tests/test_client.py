"""remat.Client against a real `remat serve` on loopback, and remat.Local against the binary."""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import REPO, served

import remat
from remat.client import Client, Local


def load(name: str) -> dict[str, Any]:
    return json.loads((REPO / "graphs" / name).read_text())  # type: ignore[no-any-return]


@pytest.fixture(params=["http", "local"])
def backend(request: pytest.FixtureRequest, server: str, binary: str) -> Client | Local:
    return Client(server) if request.param == "http" else Local(binary)


@pytest.mark.parametrize("budget", ["90%", "170MB", 170_000_000])
def test_budget_forms_give_schedules_within_them(backend: Client | Local, budget: Any) -> None:
    g = load("tiny-residual.json")
    result = backend.solve(g, budget, solver="dtr")
    assert result["stats"]["peak_memory"] <= result["budget"]
    report = backend.inspect(g)
    expected = {"90%": int(0.9 * report["checkpoint_all_peak"]), "170MB": 170_000_000, 170_000_000: 170_000_000}
    assert abs(result["budget"] - expected[budget]) <= 1


def test_fraction_of_activation_memory(backend: Client | Local) -> None:
    g = load("tiny-residual.json")
    report = backend.inspect(g)
    fixed, peak = report["fixed_memory"], report["checkpoint_all_peak"]
    result = backend.solve(g, 0.9, solver="auto", time_limit=5)
    assert result["budget"] == fixed + int(0.9 * (peak - fixed))
    assert result["stats"]["peak_memory"] <= result["budget"]
    # the simulator agrees with the solve's figures
    sim = backend.simulate(g, result, budget=result["budget"])
    assert sim["stats"]["peak_memory"] == result["stats"]["peak_memory"] and sim["fits_budget"]


def test_http_and_binary_answer_alike(server: str, binary: str) -> None:
    g = load("resnet18.json")
    a = Client(server).solve(g, "70%", solver="sethi-ullman")
    b = remat.solve_local(g, "70%", solver="sethi-ullman", binary=binary)
    assert a["stats"] == b["stats"] and a["schedule"]["events"] == b["schedule"]["events"]


def test_budget_below_minimum_raises_with_the_cause(backend: Client | Local) -> None:
    g = load("tiny-residual.json")
    with pytest.raises(remat.InfeasibleBudget, match="no schedule fits: computing node 'd_conv_a'") as e:
        backend.solve(g, 1000)
    assert e.value.result is not None and e.value.result["status"] == "infeasible"


def test_an_unproven_infeasible_budget_says_a_budget_that_fits(backend: Client | Local, binary: str) -> None:
    """Where `auto` finds no schedule and cannot prove that none exists (a 41-node random layered
    graph at its proven minimum), the error's result has a budget at which `auto` finds one, over
    HTTP as from the binary; solving there gives a schedule within it."""
    out = subprocess.run([binary, "gen", "random-layered", "--nodes", "41", "--seed", "4"], capture_output=True)
    g = json.loads(out.stdout)
    least = backend.inspect(g)["min_feasible_budget"]
    with pytest.raises(remat.InfeasibleBudget, match="finds a schedule within") as e:
        backend.solve(g, least, time_limit=30)
    assert e.value.result is not None and e.value.result["proven"] is False
    found = e.value.result["least_budget_found"]
    assert found["budget"] > least and found["solver"] == "sethi-ullman" and found["complete"]
    result = backend.solve(g, found["budget"], time_limit=30)
    assert result["stats"]["peak_memory"] <= found["budget"]


def test_bad_budget_string_raises_the_problem(server: str, binary: str) -> None:
    g = load("tiny-residual.json")
    with pytest.raises(remat.SolveError, match="unknown unit") as e:
        Client(server).solve(g, "10x")
    assert e.value.status == 422 and e.value.problem["type"] == "urn:remat:problem:invalid-budget"
    with pytest.raises(remat.SolveError, match="unknown unit") as e:
        Local(binary).solve(g, "10x")
    assert e.value.status == 2


@pytest.mark.parametrize("budget", [1.5, -1, True, [3]])
def test_budgets_refused_before_sending(server: str, budget: Any) -> None:
    with pytest.raises(remat.BudgetError):
        Client(server).solve(load("tiny-residual.json"), budget)


def test_invalid_graph_problem_names_the_node(server: str) -> None:
    g = {"nodes": [{"id": "x", "cost": 1, "memory": -3}]}
    with pytest.raises(remat.SolveError, match="memory") as e:
        Client(server).inspect(g)
    assert e.value.problem["problems"][0]["node"] == "x"


def test_job_submit_poll_wait(server: str) -> None:
    c = Client(server)
    job = c.submit(load("tiny-residual.json"), "90%", solver="dtr")
    result = c.wait(job, timeout=30)
    assert result["status"] in ("feasible", "optimal", "optimal_in_scope")
    assert c.poll(job)["status"] == "succeeded"


def test_job_cancel(server: str) -> None:
    c = Client(server)
    job = c.submit(load("resnet18.json"), "70%", solver="fastsa", time_limit=60)
    time.sleep(0.2)
    state = c.cancel(job)
    assert state is not None and state["status"] == "cancelled"
    with pytest.raises(remat.SolveError, match="cancelled"):
        c.wait(job, timeout=10)
    with pytest.raises(remat.SolveError) as e:
        c.poll("no-such-job")
    assert e.value.status == 404


def test_a_busy_service_is_asked_again_after_its_retry_after(binary: str) -> None:
    """A full queue answers 503 with `Retry-After`: `Client` waits and asks again, within
    `busy_wait`; with `busy_wait=0` the 503 is raised at once, with the wait the service asked."""
    gen = [binary, "gen", "random-layered", "--nodes", "2000", "--seed", "3"]
    long = json.loads(subprocess.run(gen, capture_output=True, text=True, check=True).stdout)
    with served(binary, "--workers", "1", "--queue", "0") as url:
        client = Client(url)
        job = client.submit(long, "70%", solver="fastsa", time_limit=3)  # FastSA runs to its limit
        while client.poll(job)["status"] != "running":
            time.sleep(0.02)
        with pytest.raises(remat.SolveError) as e:
            Client(url, busy_wait=0).solve(load("linear-8.json"), "80%")
        assert (e.value.status, e.value.retry_after) == (503, 1.0)
        with pytest.raises(remat.SolveError, match="still busy after"):
            Client(url, busy_wait=0.5).solve(load("linear-8.json"), "80%")
        start = time.monotonic()
        result = client.solve(load("linear-8.json"), "80%")
        assert result["status"] == "optimal"
        assert time.monotonic() - start > 0.5  # it waited for the long solve's end
        assert client.poll(job)["status"] == "succeeded"


def test_unreachable_server_fails_fast() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(remat.RematError, match="refused"):
        Client(f"http://127.0.0.1:{port}", timeout=5).solvers()
    assert time.monotonic() - start < 5


class Misbehaving(http.server.BaseHTTPRequestHandler):
    """A service that answers each path wrongly in its own way (and counts what it is asked)."""

    asked: ClassVar[dict[str, int]] = {}

    def log_message(self, *args: Any) -> None:
        pass

    def answer(
        self, status: int, body: bytes, headers: dict[str, str] | None = None, length: int | None = None
    ) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        Misbehaving.asked[self.path] = Misbehaving.asked.get(self.path, 0) + 1
        if self.path == "/garbage/v1/solvers":
            self.wfile.write(b"HELLO\r\n\r\n")
        elif self.path == "/short/v1/solvers":
            self.answer(200, b'{"solvers": [', length=100)
        elif self.path == "/html/v1/solvers":
            self.answer(200, b"<html>a proxy</html>")
        elif self.path == "/list/v1/solvers":
            self.answer(200, b"[1, 2]")
        elif self.path == "/problem-list/v1/solvers":
            self.answer(500, b"[1, 2]")
        elif self.path == "/proxy-504/v1/solvers":
            self.answer(504, b"<html>gateway timeout</html>")
        elif self.path == "/busy-0/v1/solvers":
            self.answer(503, b"{}", {"Retry-After": "0"})
        elif self.path == "/drip/v1/solvers":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.05)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.answer(200, b"{}")


def test_a_misbehaving_service_raises_remat_errors_that_say_what_it_did() -> None:
    """Whatever the service (or a proxy in front of it) answers, the client raises `RematError`s
    naming what went wrong, within its timeout: never a bare `http.client`, `json` or
    `AttributeError`, never a request held past the timeout, never a busy loop."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        for path, error, said in [
            ("garbage", remat.RematError, "BadStatusLine"),
            ("short", remat.RematError, "short of its Content-Length"),
            ("html", remat.RematError, "not JSON"),
            ("list", remat.RematError, "not a JSON object"),
            ("problem-list", remat.SolveError, "500 \\[1, 2\\]"),
            ("proxy-504", remat.SolveError, "504 <html>gateway timeout"),
        ]:
            with pytest.raises(error, match=said) as raised:
                Client(f"{base}/{path}").solvers()
            assert not isinstance(raised.value, remat.InfeasibleBudget), path
        start = time.monotonic()
        with pytest.raises(remat.RematError, match="did not arrive within 1"):
            Client(f"{base}/drip", timeout=1).solvers()
        assert time.monotonic() - start < 2
        with pytest.raises(remat.SolveError, match="still busy"):
            Client(f"{base}/busy-0", busy_wait=1).solvers()
        assert Misbehaving.asked["/busy-0/v1/solvers"] <= 3, "a Retry-After of 0 is a pause, not a loop"
        with pytest.raises(remat.SolveError, match="not a solve result"):
            Client(base).solve(load("linear-8.json"), 1000)
        with pytest.raises(remat.RematError, match="has no fixed_memory"):
            Client(base).inspect(load("linear-8.json"))
    finally:
        httpd.shutdown()
    for url in ["not a url", "127.0.0.1:8080", "ftp://127.0.0.1", "http://[::1", ""]:
        with pytest.raises(remat.RematError, match=r"remat\.Client"):
            Client(url)


def test_a_binary_that_prints_no_json_is_quoted(tmp_path: Path) -> None:
    path = tmp_path / "remat"
    path.write_text("#!/bin/sh\necho 'not json'\n")
    path.chmod(0o755)
    with pytest.raises(remat.RematError, match="printed no JSON: not json"):
        Local(path).inspect(load("linear-8.json"))


def test_missing_binary_is_named(tmp_path: Any) -> None:
    with pytest.raises(remat.RematError, match="no remat binary"):
        Local(tmp_path / "nope")


def test_a_binary_that_is_not_executable_is_named(tmp_path: Path) -> None:
    path = tmp_path / "remat"
    path.write_text("not a program")
    with pytest.raises(remat.RematError, match="is not executable"):
        Local(path)


def test_options_are_checked_and_values_stay_values(binary: str, server: str) -> None:
    """A misspelt option is refused with the nearest one; a value starting with '-' reaches the
    solver as a value (the binary's message, not its usage text)."""
    g = load("resnet18.json")
    for backend in (Local(binary), Client(server)):
        with pytest.raises(TypeError, match="'time_limt' \\(did you mean 'time_limit'\\?\\)"):
            backend.solve(g, "80%", time_limt=30)  # type: ignore[call-arg]
    with pytest.raises(remat.SolveError, match="a percentage must be greater than 0"):
        Local(binary).solve(g, "-5%")


def test_package_and_binary_share_the_version(binary: str) -> None:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.split() == ["remat", remat.__version__]


def test_binary_lookup_order(tmp_path: Path, binary: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """REMAT_BIN, then this interpreter's scripts directory, then PATH."""
    scripts, on_path = tmp_path / "scripts", tmp_path / "path"
    scripts.mkdir()
    on_path.mkdir()
    (on_path / "remat").symlink_to(binary)
    get_path = sysconfig.get_path
    monkeypatch.setattr(
        sysconfig, "get_path", lambda name, *a: str(scripts) if name == "scripts" else get_path(name, *a)
    )
    monkeypatch.setenv("PATH", str(on_path))
    monkeypatch.delenv("REMAT_BIN", raising=False)
    assert Local().binary == str(on_path / "remat")
    (scripts / "remat").symlink_to(binary)
    assert Local().binary == str(scripts / "remat")
    monkeypatch.setenv("REMAT_BIN", binary)
    assert Local().binary == binary
    # a relative path is taken from where the call is made, and kept absolute
    monkeypatch.chdir(Path(binary).parent)
    monkeypatch.setenv("REMAT_BIN", Path(binary).name)
    local = Local()
    monkeypatch.chdir(tmp_path)
    assert local.binary == binary
    assert local.solve(load("tiny-residual.json"), "90%", solver="dtr")["stats"]["peak_memory"] > 0
    monkeypatch.setenv("REMAT_BIN", str(tmp_path / "nope"))
    with pytest.raises(remat.RematError, match="no remat binary"):
        Local()


@pytest.mark.skipif(
    not (Path(sysconfig.get_path("scripts")) / "remat").is_file(),
    reason="no remat installed beside this interpreter (CI's run against the installed wheel has one)",
)
def test_local_finds_the_installed_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a user of the wheel: no REMAT_BIN, nothing on PATH; `remat.Local()` still solves."""
    monkeypatch.delenv("REMAT_BIN", raising=False)
    monkeypatch.setenv("PATH", "")
    local = Local()
    assert Path(local.binary).parent == Path(sysconfig.get_path("scripts"))
    result = local.solve(load("tiny-residual.json"), "90%", solver="dtr")
    assert result["stats"]["peak_memory"] <= result["budget"]


def test_the_same_call_gives_the_same_schedule(server: str, binary: str) -> None:
    """auto at its default settings is deterministic (effort counted in work units, seeded): five
    solves by the binary, each its own process, give byte-identical schedules, the service gives
    the same one, and the result says what ended the search."""
    graph = load("unet-small.json")  # at 70% the MILP decides after the floor candidates
    results = [Local(binary).solve(graph, "70%") for _ in range(5)]
    results.append(Client(server).solve(graph, "70%"))
    # the events: `Client` asks the service for events only (`events_only`), without stage matrices
    first = json.dumps(results[0]["schedule"]["events"], sort_keys=True)
    assert all(json.dumps(r["schedule"]["events"], sort_keys=True) == first for r in results[1:])
    whole = json.dumps(results[0]["schedule"], sort_keys=True)  # the binary's five: stage matrices too
    assert all(json.dumps(r["schedule"], sort_keys=True) == whole for r in results[1:5])
    assert results[0]["ended_by"] in {"converged", "stall", "work_limit"}
