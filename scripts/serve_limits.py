#!/usr/bin/env python3
"""Issue 26's service check: `remat serve` under a 4 GiB address space
(`prlimit --as=4294967296`, the manifests' limit) stays up through

  A. 3 concurrent 60 MB `/v1/inspect` bodies of 20 M empty nodes (`{"graph":{"nodes":[{},...]}}`),
  B. 3 concurrent `/v1/solve` of a valid 8-node graph with a 62 MB `meta` array,
  C. a 1,000,000-node chain (`remat gen linear --layers 499999`) solved with each solver
     (`time_limit_s` LIMIT, budget 80%), one after the other,
  D. 2 concurrent `/v1/inspect` of that chain,

with `/healthz` polled every 100 ms throughout; then (E) SIGTERM to a second server
(`--grace 5`) 2 s into a `/v1/solve` of `remat gen random-layered --nodes 100000` with `auto`
and `time_limit_s` 60, and the seconds until it exits (issue 26: within the grace + 1 s). Prints, per phase, each answer's status and
wall time, the slowest `/healthz` and the failed ones, and the server's peak RSS (`VmHWM`)
and whether it is still alive.

    scripts/serve_limits.py [BIN] [--limit SECONDS] [--phases ABCDE] [--solvers a,b]

BIN defaults to target/release/remat; the server gets its default flags but `--max-body`
(96MiB by default: the 1M-node chain's native JSON is about 78 MB).
"""

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Tuple

MIB = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(port: int, path: str, body: bytes, timeout: float = 600) -> Tuple[int, float, str]:
    start = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("POST", path, body, {"content-type": "application/json"})
        r = c.getresponse()
        text = r.read().decode(errors="replace")
        c.close()
        return r.status, time.monotonic() - start, text
    except (OSError, http.client.HTTPException) as e:
        return -1, time.monotonic() - start, repr(e)


class Health(threading.Thread):
    """Polls /healthz every 100 ms; records the slowest answer and the failures."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.reset()

    def reset(self) -> None:
        self.slowest = 0.0
        self.failed = 0
        self.polls = 0

    def run(self) -> None:
        while not self.stop.is_set():
            start = time.monotonic()
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/healthz")
                ok = c.getresponse().status == 200
                c.close()
            except (OSError, http.client.HTTPException):
                ok = False
            took = time.monotonic() - start
            self.polls += 1
            self.slowest = max(self.slowest, took)
            self.failed += 0 if ok else 1
            time.sleep(max(0.0, 0.1 - took))


def peak_rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def at_once(
    port: int, path: str, bodies: List[bytes], health: "Health"
) -> List[Tuple[int, float, str]]:
    """Sends `bodies` at once; `/healthz` is judged from here (building a body in Python
    holds the interpreter, which would stall the poller, not the server)."""
    health.reset()
    out: List[Tuple[int, float, str]] = [(0, 0.0, "")] * len(bodies)

    def send(i: int) -> None:
        out[i] = post(port, path, bodies[i])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def short(text: str) -> str:
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            return str(doc.get("status") or doc.get("title") or doc.get("detail"))[:60]
    except ValueError:
        pass
    return text[:60].replace("\n", " ")


def chain_body(bin_path: str, work: str) -> bytes:
    path = os.path.join(work, "chain-1m.json")
    subprocess.run([bin_path, "gen", "linear", "--layers", "499999", "-o", path], check=True)
    with open(path) as f:
        graph = json.load(f)
    # Compact: no empty `inputs`, integral costs as integers (about 78 MB for 1M nodes).
    for node in graph["nodes"]:
        if not node.get("inputs"):
            node.pop("inputs", None)
        if float(node["cost"]).is_integer():
            node["cost"] = int(node["cost"])
    return json.dumps(graph, separators=(",", ":")).encode()


def start_server(bin_path: str, *flags: str) -> Tuple["subprocess.Popen[bytes]", int]:
    """`remat serve` under the 4 GiB address space, once it accepts connections; its log
    goes to a file (a pipe nobody reads would fill and stop the server)."""
    port = free_port()
    log = open(os.path.join(tempfile.gettempdir(), f"remat-serve-{port}.log"), "wb")
    server = subprocess.Popen(
        ["prlimit", "--as=4294967296", bin_path, "serve", "--addr", f"127.0.0.1:{port}", *flags],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    return server, port


def sigterm_during_solve(bin_path: str, work: str) -> Dict[str, Any]:
    """Phase E: seconds from SIGTERM to exit, 2 s into a 100k-node solve, `--grace 5`."""
    path = os.path.join(work, "rl-100k.json")
    subprocess.run(
        [bin_path, "gen", "random-layered", "--nodes", "100000", "--seed", "1", "-o", path],
        check=True,
    )
    with open(path, "rb") as f:
        graph = f.read()
    body = b'{"graph":' + graph + b',"budget":"80%","solver":"auto","time_limit_s":60}'
    server, port = start_server(bin_path, "--grace", "5")
    threading.Thread(target=post, args=(port, "/v1/solve", body), daemon=True).start()
    time.sleep(2)
    sent = time.monotonic()
    server.terminate()
    code = server.wait(timeout=120)
    return {"phase": "E: SIGTERM 2 s into a 100k-node solve, --grace 5",
            "exit_s": round(time.monotonic() - sent, 2), "code": code}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bin", nargs="?", default="target/release/remat")
    ap.add_argument("--limit", type=float, default=5.0)
    ap.add_argument("--phases", default="ABCDE")
    ap.add_argument("--solvers", default="")
    # The 1M-node chain is about 78 MB of native JSON, over the default 64 MiB body.
    ap.add_argument("--max-body", default="96MiB")
    args = ap.parse_args()
    server, port = start_server(args.bin, "--max-body", args.max_body)
    health = Health(port)
    health.start()
    rows: List[Dict[str, Any]] = []

    def phase(name: str, results: List[Tuple[int, float, str]], started: float) -> None:
        rows.append(
            {
                "phase": name,
                "answers": [(s, round(w, 2), short(t)) for s, w, t in results],
                "wall_s": round(time.monotonic() - started, 2),
                "slowest_healthz_s": round(health.slowest, 3),
                "failed_healthz": health.failed,
                "peak_rss_mib": round(peak_rss_mib(server.pid), 1),
                "alive": server.poll() is None,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        health.reset()

    with tempfile.TemporaryDirectory() as work:
        if "A" in args.phases:
            empties = b'{"graph":{"nodes":[' + b",".join([b"{}"] * 20_000_000) + b"]}}"
            started = time.monotonic()
            phase("A: 3 x 60 MB {} nodes", at_once(port, "/v1/inspect", [empties] * 3, health), started)
            del empties
        if "B" in args.phases:
            nodes = [{"id": "x", "cost": 1, "memory": 8}] + [
                {"id": f"n{i}", "cost": 1, "memory": 8, "inputs": ["x" if i == 0 else f"n{i - 1}"]}
                for i in range(7)
            ]
            meta = b"[" + b",".join([b"1"] * (31 * MIB)) + b"]"
            graph = json.dumps({"nodes": nodes}).encode()[:-1] + b',"meta":' + meta + b"}"
            body = b'{"graph":' + graph + b',"budget":"100%","solver":"checkpoint-all"}'
            started = time.monotonic()
            phase("B: 3 x 62 MB meta solves", at_once(port, "/v1/solve", [body] * 3, health), started)
            del meta, body
        if "C" in args.phases or "D" in args.phases:
            chain = chain_body(args.bin, work)
            print(f"chain body: {len(chain) / 1e6:.1f} MB", flush=True)
        if "C" in args.phases:
            listed = subprocess.run([args.bin, "solvers"], capture_output=True, text=True).stdout
            solvers = args.solvers.split(",") if args.solvers else [
                line.split()[0] for line in listed.splitlines() if line and not line[0].isspace()
            ]
            for s in solvers:
                body = (
                    b'{"graph":' + chain + b',"budget":"80%","solver":"' + s.encode()
                    + b'","time_limit_s":' + str(args.limit).encode() + b"}"
                )
                started = time.monotonic()
                health.reset()
                phase(f"C: 1M chain, {s}", [post(port, "/v1/solve", body)], started)
        if "D" in args.phases:
            body = b'{"graph":' + chain + b"}"
            started = time.monotonic()
            phase("D: 2 x 1M chain inspect", at_once(port, "/v1/inspect", [body] * 2, health), started)
        if "E" in args.phases:
            print(json.dumps(sigterm_during_solve(args.bin, work)), flush=True)
    health.stop.set()
    alive = server.poll() is None
    peak = peak_rss_mib(server.pid)
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    print(json.dumps({"alive_at_end": alive, "peak_rss_mib": round(peak, 1)}))
    return 0 if alive and all(r["alive"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
