"""Talking to remat: `Client` (a `remat serve` sidecar over HTTP, stdlib only) and `Local` (the
`remat` binary). Both answer the same calls with the same JSON (the service and the CLI share one
front door); errors become exceptions carrying the problem document.
"""

from __future__ import annotations

import difflib
import gzip
import http.client
import json
import math
import os
import shutil
import subprocess
import sysconfig
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from pathlib import Path
from typing import Any, Protocol, TypedDict

from typing_extensions import Unpack

from . import budget as _budget
from .errors import InfeasibleBudget, RematError, SolveError

Graph = dict[str, Any]
Result = dict[str, Any]

# what `inspect` answers that `remat.budget` and `remat.apply` read
_INSPECTED = ("fixed_memory", "checkpoint_all_peak")

_NO_SCHEDULE = ("infeasible", "no_solution", "error")

# the least pause before asking a busy service again, whatever its `Retry-After` says (0 would
# ask again at once, over and over)
_LEAST_PAUSE = 0.5

# what the service answers beyond a solve's own time limit or the client's `timeout` is read in
# pieces of at most this many bytes, the time left checked between them
_PIECE = 1 << 16


def _object(answer: Any, where: str, keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """`answer` if it is a JSON object with `keys`, else a `RematError` saying what `where` gave."""
    if not isinstance(answer, dict):
        raise RematError(f"{where}: the answer is {_excerpt(answer)}, not a JSON object")
    missing = [k for k in keys if k not in answer]
    if missing:
        raise RematError(f"{where}: the answer has no {', '.join(missing)}: {_excerpt(answer)}")
    return answer


def _excerpt(value: Any) -> str:
    text = json.dumps(value) if value is not None else "empty"
    return text if len(text) <= 200 else text[:200] + "..."


def _checked(result: Any, where: str = "remat") -> Result:
    """The result, or `InfeasibleBudget` / `SolveError` when it holds no schedule (`SolveError`
    when it is not a solve result at all)."""
    if not isinstance(result, dict) or not isinstance(result.get("status"), str):
        raise SolveError(f"{where}: the answer is not a solve result (no status): {_excerpt(result)}")
    status = result.get("status")
    if status in _NO_SCHEDULE:
        message = result.get("message") or f"no schedule ({status})"
        cls = InfeasibleBudget if status != "error" else SolveError
        raise cls(f"remat: {status}: {message}", result=result)
    return result


class SolveOptions(TypedDict, total=False):
    """Options of a solve: `solver` (default "auto"), `time_limit` (seconds), `seed`, and `effort`:
    `auto`'s work as a multiple of its default (deterministic: the same schedule on any machine,
    the time limit only a safety cap) or "time" (spend the time limit; not reproducible)."""

    solver: str
    time_limit: float | None
    seed: int | None
    effort: float | str | None


def _known(options: SolveOptions) -> SolveOptions:
    """`options`, or a `TypeError` naming the first that is not a solve option (with the nearest one)."""
    known = SolveOptions.__annotations__
    for name in options:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise TypeError(f"unknown solve option {name!r}{hint}: the options are {', '.join(known)}")
    return options


class Backend(Protocol):
    """What `remat.apply` needs from remat: solve, inspect, simulate."""

    def solve(self, graph: Graph, budget: _budget.Budget, **options: Unpack[SolveOptions]) -> Result: ...

    def inspect(self, graph: Graph) -> dict[str, Any]: ...

    def simulate(self, graph: Graph, schedule: Any, budget: _budget.Budget | None = None) -> dict[str, Any]: ...


class Client:
    """A `remat serve` at `url` (e.g. "http://127.0.0.1:8080"). `timeout`: seconds per request
    beyond a solve's own time limit. `busy_wait`: seconds a request may wait in all for room when
    the service is busy (503 with `Retry-After`: its queue is full), asking again after each
    `Retry-After`; 0 raises at once. A service that is shutting down (503 without `Retry-After`)
    is not asked again."""

    def __init__(self, url: str = "http://127.0.0.1:8080", *, timeout: float = 30.0, busy_wait: float = 60.0) -> None:
        try:
            parts = urllib.parse.urlsplit(url)
            host = parts.hostname
        except ValueError as e:
            raise RematError(f"remat.Client({url!r}): {e}") from None
        if parts.scheme not in ("http", "https") or not host:
            raise RematError(f"remat.Client({url!r}): give the service's http(s) URL, such as http://127.0.0.1:8080")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.busy_wait = busy_wait

    def _request(self, method: str, path: str, body: Any = None, *, timeout: float | None = None) -> Any:
        """The JSON answer of one request, asked again while the service is busy (`busy_wait`)."""
        data = None if body is None else json.dumps(body).encode()
        start = time.monotonic()
        while True:
            try:
                return self._send(method, path, data, timeout=timeout)
            except SolveError as e:
                waited = time.monotonic() - start
                if e.retry_after is None:
                    raise
                if waited + e.retry_after > self.busy_wait:
                    raise SolveError(
                        f"{e} (still busy after {waited:.1f} s of asking again; Client(busy_wait=...) waits longer)",
                        problem=e.problem,
                        status=e.status,
                        retry_after=e.retry_after,
                    ) from None
                time.sleep(e.retry_after)

    def _send(self, method: str, path: str, data: bytes | None, *, timeout: float | None) -> Any:
        """One request's JSON answer, all of it within `timeout` (else the client's): each wait
        for the service and the answer's body as a whole. Whatever goes wrong on the way (no
        answer, a broken one, one that is not JSON) is a `RematError`; an HTTP error status a
        `SolveError` carrying the problem document."""
        headers = {"accept-encoding": "gzip"}
        if data is not None:
            headers["content-type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        limit = timeout or self.timeout
        deadline = time.monotonic() + limit
        where = f"remat {method} {self.url}{path}"
        try:
            with urllib.request.urlopen(req, timeout=limit) as resp:
                raw = _body(resp, deadline, limit, where)
        except urllib.error.HTTPError as e:
            raise self._problem(e, method, path, deadline, limit) from None
        except urllib.error.URLError as e:
            raise RematError(f"{where}: {e.reason}") from e
        except (OSError, http.client.HTTPException, EOFError, zlib.error, ValueError) as e:
            raise RematError(f"{where}: {type(e).__name__}: {e}") from e
        try:
            return json.loads(raw) if raw else None
        except ValueError as e:
            raise RematError(f"{where}: the answer is not JSON ({e})") from e

    def _problem(
        self, e: urllib.error.HTTPError, method: str, path: str, deadline: float, limit: float
    ) -> SolveError | RematError:
        """The exception an HTTP error status calls for: `SolveError` with the problem document
        (`InfeasibleBudget` for the service's 504, the time limit passed with no schedule)."""
        try:
            raw = _body(e, deadline, limit, "")
        except (OSError, http.client.HTTPException, EOFError, zlib.error, RematError):
            raw = b""
        try:
            problem = json.loads(raw)
        except ValueError:
            problem = None
        if not isinstance(problem, dict):
            problem = {"status": e.code, "detail": raw.decode(errors="replace")}
        detail = problem.get("detail") or problem.get("title") or str(e)
        time_limit = e.code == 504 and str(problem.get("type", "")).endswith(":time-limit")
        cls = InfeasibleBudget if time_limit else SolveError
        result = problem.get("result")
        return cls(
            f"remat {method} {path}: {e.code} {detail}",
            problem=problem,
            status=e.code,
            result=result if isinstance(result, dict) else None,
            retry_after=_retry_after(e.code, e.headers.get("retry-after")),
        )

    def _solve_body(self, graph: Graph, budget: _budget.Budget, options: SolveOptions) -> dict[str, Any]:
        _known(options)
        body: dict[str, Any] = {
            "graph": graph,
            "budget": _budget.resolve(budget, lambda: self.inspect(graph)),
            "solver": options.get("solver", "auto"),
            "events_only": True,
        }
        if options.get("time_limit") is not None:
            body["time_limit_s"] = options["time_limit"]
        if options.get("seed") is not None:
            body["seed"] = options["seed"]
        if options.get("effort") is not None:
            body["effort"] = options["effort"]
        return body

    def solve(self, graph: Graph, budget: _budget.Budget, **options: Unpack[SolveOptions]) -> Result:
        """The schedule within `budget` (see `remat.budget`), or `InfeasibleBudget`/`SolveError`."""
        body = self._solve_body(graph, budget, options)
        wait = self.timeout + (options.get("time_limit") or 120.0)
        return _checked(self._request("POST", "/v1/solve", body, timeout=wait), f"remat POST {self.url}/v1/solve")

    def inspect(self, graph: Graph) -> dict[str, Any]:
        """Nodes, edges, Σ cost, fixed memory, checkpoint-all peak, minimum feasible budget."""
        answer = self._request("POST", "/v1/inspect", {"graph": graph})
        return _object(answer, f"remat POST {self.url}/v1/inspect", _INSPECTED)

    def simulate(self, graph: Graph, schedule: Any, budget: _budget.Budget | None = None) -> dict[str, Any]:
        """The simulator's figures for `schedule` (events, a result, or {"events": [...]})."""
        body: dict[str, Any] = {"graph": graph, "schedule": schedule}
        if budget is not None:
            body["budget"] = _budget.resolve(budget, lambda: self.inspect(graph))
        return _object(self._request("POST", "/v1/simulate", body), f"remat POST {self.url}/v1/simulate", ("stats",))

    def solvers(self) -> list[dict[str, Any]]:
        answer = _object(self._request("GET", "/v1/solvers"), f"remat GET {self.url}/v1/solvers", ("solvers",))
        return list(answer["solvers"])

    def submit(self, graph: Graph, budget: _budget.Budget, **options: Unpack[SolveOptions]) -> str:
        """Start a solve in the background; its job id."""
        answer = self._request("POST", "/v1/jobs", self._solve_body(graph, budget, options))
        return str(_object(answer, f"remat POST {self.url}/v1/jobs", ("id",))["id"])

    def poll(self, job: str) -> dict[str, Any]:
        """The job: `status` (queued, running, succeeded, failed, cancelled), `progress`, `result`."""
        path = f"/v1/jobs/{urllib.parse.quote(job, safe='')}"
        return _object(self._request("GET", path), f"remat GET {self.url}{path}", ("status",))

    def cancel(self, job: str) -> dict[str, Any] | None:
        """Cancel an active job (its state) or remove a finished one (None)."""
        return self._request("DELETE", f"/v1/jobs/{urllib.parse.quote(job, safe='')}")  # type: ignore[no-any-return]

    def wait(self, job: str, *, timeout: float = 600.0, interval: float = 0.2) -> Result:
        """Poll `job` until it ends; its result, or the exception its problem document calls for."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.poll(job)
            if state["status"] == "succeeded":
                return _checked(state.get("result"), f"remat job {job}")
            if state["status"] in ("failed", "cancelled"):
                problem = state.get("error") or {}
                raise SolveError(
                    f"remat job {job} {state['status']}: {problem.get('detail', '')}".rstrip(": "),
                    problem=problem,
                    status=problem.get("status"),
                    result=state.get("result"),
                )
            if time.monotonic() > deadline:
                raise RematError(f"remat job {job} still {state['status']} after {timeout} s")
            time.sleep(interval)


def _body(resp: Any, deadline: float, limit: float, where: str) -> bytes:
    """The answer's body, read by pieces until `deadline` (a service sending a byte at a time
    would otherwise hold the request for as long as it likes), gunzipped when it says so."""
    pieces = []
    while piece := resp.read1(_PIECE) if hasattr(resp, "read1") else resp.read(_PIECE):
        pieces.append(piece)
        if time.monotonic() > deadline:
            raise RematError(f"{where}: the answer did not arrive within {limit} s")
    short = getattr(resp, "length", None)
    if short:
        raise RematError(f"{where}: the answer ended {short} bytes short of its Content-Length")
    raw = b"".join(pieces)
    return gzip.decompress(raw) if resp.headers.get("content-encoding") == "gzip" else raw


def _retry_after(status: int, header: str | None) -> float | None:
    """The seconds a busy service asks the client to wait before asking again (503 with
    `Retry-After` in seconds, at least `_LEAST_PAUSE`; one it cannot read: 1), or None where it is
    not busy (a service shutting down sends none)."""
    if status != 503 or header is None:
        return None
    try:
        seconds = float(header)
    except ValueError:
        seconds = 1.0
    return max(_LEAST_PAUSE, seconds) if math.isfinite(seconds) and seconds >= 0 else 1.0


def find_binary(binary: str | os.PathLike[str] | None = None) -> str:
    """The `remat` binary, as an absolute path (a relative one still works after a chdir):
    `binary`, else $REMAT_BIN, else the one the wheel installed in this interpreter's scripts
    directory (found whether or not its environment is activated), else `remat` on PATH."""
    scripts = sysconfig.get_path("scripts")
    found = (
        str(binary)
        if binary
        else os.environ.get("REMAT_BIN") or shutil.which("remat", path=scripts) or shutil.which("remat")
    )
    if not found or not Path(found).is_file():
        where = found or f"none in {scripts} nor on PATH"
        raise RematError(
            f"no remat binary ({where}): `pip install remat` installs one; else set REMAT_BIN, "
            "put `remat` on PATH or pass binary="
        )
    if not os.access(found, os.X_OK):
        raise RematError(f"the remat binary {found} is not executable (chmod +x it, or point REMAT_BIN elsewhere)")
    return os.path.abspath(found)


class Local:
    """The `remat` binary, run once per call (`timeout` seconds beyond a solve's time limit)."""

    def __init__(self, binary: str | os.PathLike[str] | None = None, *, timeout: float = 60.0) -> None:
        self.binary = find_binary(binary)
        self.timeout = timeout

    def _run(self, args: list[str], files: dict[str, Any], timeout: float) -> tuple[int, str, str]:
        with tempfile.TemporaryDirectory(prefix="remat-") as tmp:
            paths = []
            for name, doc in files.items():
                p = Path(tmp) / name
                p.write_text(json.dumps(doc))
                paths.append(str(p))
            cmd = [self.binary, args[0], *paths, *args[1:]]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
            except subprocess.TimeoutExpired as e:
                raise RematError(f"remat {args[0]} did not finish in {timeout} s") from e
        if done.returncode not in (0, 1):
            detail = done.stderr.strip().removeprefix("error: ")
            raise SolveError(f"remat {args[0]}: {detail}", problem={"detail": detail}, status=done.returncode)
        return done.returncode, done.stdout, done.stderr

    def _json(self, args: list[str], files: dict[str, Any], timeout: float) -> Any:
        """What `remat <args>` prints, read as JSON; a `RematError` quoting it (and its standard
        error) when it is not."""
        code, out, err = self._run(args, files, timeout)
        try:
            return json.loads(out)
        except ValueError:
            said = (out.strip() or err.strip() or "nothing")[:200]
            raise RematError(f"{self.binary} {args[0]} (exit {code}) printed no JSON: {said}") from None

    def solve(self, graph: Graph, budget: _budget.Budget, **options: Unpack[SolveOptions]) -> Result:
        """As `Client.solve`, by `remat solve --json`."""
        _known(options)
        b = _budget.resolve(budget, lambda: self.inspect(graph))
        # `--flag=value`: a value that starts with '-' ("-5%") stays the flag's, refused with its message
        args = ["solve", f"--budget={b}", f"--solver={options.get('solver', 'auto')}", "--json"]
        if options.get("time_limit") is not None:
            args.append(f"--time-limit={options['time_limit']}")
        if options.get("seed") is not None:
            args.append(f"--seed={options['seed']}")
        if options.get("effort") is not None:
            args.append(f"--effort={options['effort']}")
        limit = self.timeout + (options.get("time_limit") or 120.0)
        return _checked(self._json(args, {"graph.json": graph}, limit), f"{self.binary} solve")

    def inspect(self, graph: Graph) -> dict[str, Any]:
        answer = self._json(["inspect", "--json"], {"graph.json": graph}, self.timeout)
        return _object(answer, f"{self.binary} inspect", _INSPECTED)

    def simulate(self, graph: Graph, schedule: Any, budget: _budget.Budget | None = None) -> dict[str, Any]:
        args = ["simulate", "--json"]
        if budget is not None:
            args.append(f"--budget={_budget.resolve(budget, lambda: self.inspect(graph))}")
        # exit 1: valid but over the budget; the report says so (fits_budget false)
        answer = self._json(args, {"graph.json": graph, "schedule.json": schedule}, self.timeout)
        return _object(answer, f"{self.binary} simulate", ("stats",))


def backend(server: str | None = None, *, binary: str | None = None) -> Backend:
    """`Client(server)` when a server URL is given, else `Local(binary)`."""
    return Client(server) if server else Local(binary)


def solve_local(
    graph: Graph, budget: _budget.Budget, *, binary: str | None = None, **options: Unpack[SolveOptions]
) -> Result:
    """Solve with the `remat` binary (see `find_binary`), no server needed."""
    return Local(binary).solve(graph, budget, **options)
