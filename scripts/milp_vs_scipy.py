#!/usr/bin/env python3
"""remat's Checkmate MILP against the textbook build of the same model on scipy's HiGHS.

The reference (issue 13) is Checkmate's MILP (Jain et al., MLSys 2020, §4) built the plain
way, in Python, and solved by `scipy.optimize.milp` (HiGHS): the lower-triangular
frontier-advancing model of `src/solve/exact/checkmate/mod.rs` with the same horizon cut,
the same scaling (memory by the gcd of the sizes, costs by their gcd or their maximum) and
the same budget `B - K`, but none of remat's levers (no MIP start, no cutoff, no fixing).

For each case the script runs `remat solve --solver milp` (the release binary) once and the
scipy build once, in the same conditions, and prints a table of times and optima. The
budget in bytes is remat's own resolution of the budget string (the result's `budget`), so
both solve the same instance.

    pip install scipy
    python3 scripts/milp_vs_scipy.py [--remat target/release/remat] [--time-limit 600]

Cases are `graph@budget`; the default is the issue's three (linear-8 at 4, VGG16 at 90%,
FCN8 at 90%).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

ROOT = Path(__file__).resolve().parent.parent
MLSYS = Path("/work/shared/benchmarks/mlsys")
DEFAULT_CASES = [
    f"{ROOT}/graphs/linear-8.json@4",
    f"{MLSYS}/VGG16_256_224x224_train.json@90%",
    f"{MLSYS}/fcn_8_vgg_32_416x608_train.json@90%",
]


@dataclass
class Graph:
    """A training graph in solver order: node i's inputs are lower indices."""

    cost: list[float]
    memory: list[int]
    preds: list[list[int]]
    fixed_memory: int

    @property
    def n(self) -> int:
        return len(self.cost)

    def succs(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.n)]
        for v, ps in enumerate(self.preds):
            for u in ps:
                out[u].append(v)
        return out


def load(path: Path) -> Graph:
    """Native or networkx node-link JSON, in remat's solver order (the file's order when
    it is topological, else Kahn's algorithm breaking ties by file position)."""
    doc = json.loads(path.read_text())
    fixed = int(doc.get("fixed_memory", 0))
    if "links" in doc or "edges" in doc:
        nodes = doc["nodes"]
        key = [str(n.get("id", n.get("name"))) for n in nodes]
        cost = [float(n.get("cost_cpu", n.get("duration", 0.0))) for n in nodes]
        memory = [int(n.get("cost_ram", n.get("out_cost", 0))) for n in nodes]
        fixed = sum(int(n.get("param_cost", 0)) for n in nodes)
        pos = {k: i for i, k in enumerate(key)}
        preds: list[set[int]] = [set() for _ in nodes]
        for link in doc.get("links", doc.get("edges", [])):
            target = link.get("target", link.get("1"))
            source = link.get("source", link.get("0"))
            preds[pos[str(target)]].add(pos[str(source)])
    else:
        nodes = doc["nodes"]
        pos = {n["id"]: i for i, n in enumerate(nodes)}
        cost = [float(n["cost"]) for n in nodes]
        memory = [int(n["memory"]) for n in nodes]
        preds = [{pos[i] for i in n.get("inputs", [])} for n in nodes]
    n = len(cost)
    order = list(range(n))
    if any(u >= v for v in range(n) for u in preds[v]):
        indeg = [len(p) for p in preds]
        succ: list[list[int]] = [[] for _ in range(n)]
        for v in range(n):
            for u in preds[v]:
                succ[u].append(v)
        heap = [v for v in range(n) if indeg[v] == 0]
        heapq.heapify(heap)
        order = []
        while heap:
            u = heapq.heappop(heap)
            order.append(u)
            for v in succ[u]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    heapq.heappush(heap, v)
    rank = {v: r for r, v in enumerate(order)}
    return Graph(
        cost=[cost[v] for v in order],
        memory=[memory[v] for v in order],
        preds=[sorted(rank[u] for u in preds[v]) for v in order],
        fixed_memory=fixed,
    )


def cost_scale(g: Graph) -> float:
    """remat's cost unit: the gcd of integral costs when the range stays within 1e9,
    else the largest cost."""
    top = max(g.cost, default=0.0)
    if top <= 0.0:
        return 1.0
    if all(c == int(c) and c < 9.0e15 for c in g.cost):
        div = max(reduce(math.gcd, (int(c) for c in g.cost), 0), 1)
        if top / div <= 1.0e9:
            return float(div)
    return top


class Model:
    """Column and row lists of the lower-triangular model (`checkmate/mod.rs`)."""

    def __init__(self) -> None:
        self.c: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.integer: list[int] = []
        self.rows: list[list[tuple[int, float]]] = []
        self.rlo: list[float] = []
        self.rhi: list[float] = []

    def col(self, cost: float, lo: float, hi: float, integer: bool) -> int:
        self.c.append(cost)
        self.lo.append(lo)
        self.hi.append(hi)
        self.integer.append(int(integer))
        return len(self.c) - 1

    def row(self, lo: float, hi: float, terms: list[tuple[int, float]]) -> None:
        self.rows.append(terms)
        self.rlo.append(lo)
        self.rhi.append(hi)


def build(g: Graph, budget: int, mem_div: float = 1.0, cost_div: float | None = None) -> Model:
    """The model; `mem_div` and `cost_div` (experiments only) replace the memory and
    cost units after the gcd."""
    n = g.n
    succ = g.succs()
    h = list(range(n))
    for i in reversed(range(n)):
        for j in succ[i]:
            h[i] = max(h[i], h[j])
    gm = max(reduce(math.gcd, g.memory, 0), 1)
    m = [x // gm / mem_div for x in g.memory]
    cap = float((budget - g.fixed_memory) // gm) / mem_div
    cs = cost_scale(g) if cost_div is None else cost_div
    md = Model()
    r = [[-1] * (t + 1) for t in range(n)]
    s = [[-1] * t for t in range(n)]
    u = [[-1] * (t + 1) for t in range(n)]
    for t in range(n):
        for i in range(t + 1):
            if t <= h[i]:
                r[t][i] = md.col(g.cost[i] / cs, 1.0 if i == t else 0.0, 1.0, True)
        for i in range(t):
            if t <= h[i]:
                s[t][i] = md.col(0.0, 0.0, 1.0, True)
        for k in range(t + 1):
            u[t][k] = md.col(0.0, 0.0, cap, False)
    inf = math.inf
    for t in range(n):
        free_of: list[list[tuple[int, int]]] = [[] for _ in range(t + 1)]
        for k in range(t + 1):
            if r[t][k] >= 0:
                for i in g.preds[k]:
                    free_of[k].append((i, md.col(0.0, 0.0, 1.0, True)))

        def rt(i: int) -> int:
            return r[t][i]

        def st(i: int) -> int:
            return s[t][i] if i < t else -1

        def snext(i: int) -> int:
            return s[t + 1][i] if t + 1 < n else -1

        # (e) U[t,0] = M_0 R[t,0] + sum_i M_i S[t,i]
        terms = [(u[t][0], 1.0)]
        if rt(0) >= 0:
            terms.append((rt(0), -m[0]))
        terms += [(st(i), -m[i]) for i in range(t) if st(i) >= 0]
        md.row(0.0, 0.0, terms)
        # (f) U[t,k+1] = U[t,k] + M_{k+1} R[t,k+1] - sum FREE
        for k in range(t):
            terms = [(u[t][k + 1], 1.0), (u[t][k], -1.0)]
            if rt(k + 1) >= 0:
                terms.append((rt(k + 1), -m[k + 1]))
            terms += [(f, float(m[i])) for i, f in free_of[k]]
            md.row(0.0, 0.0, terms)
        # (b) S[t,i] <= S[t-1,i] + R[t-1,i]
        if t >= 1:
            for i in range(t):
                if st(i) < 0:
                    continue
                terms = [(st(i), 1.0)]
                if r[t - 1][i] >= 0:
                    terms.append((r[t - 1][i], -1.0))
                if i < t - 1 and s[t - 1][i] >= 0:
                    terms.append((s[t - 1][i], -1.0))
                md.row(-inf, 0.0, terms)
        # (c) R[t,v] <= R[t,u] + S[t,u]
        for v in range(t + 1):
            if rt(v) < 0:
                continue
            for p in g.preds[v]:
                terms = [(rt(v), 1.0)]
                if rt(p) >= 0:
                    terms.append((rt(p), -1.0))
                if st(p) >= 0:
                    terms.append((st(p), -1.0))
                md.row(-inf, 0.0, terms)
        # (d) FREE linearisation with the hazards H and their number kappa
        for k in range(t + 1):
            if rt(k) < 0:
                continue
            for i, f in free_of[k]:
                later = [rt(j) for j in succ[i] if k < j <= t and rt(j) >= 0]
                keep = snext(i)
                kappa = 1.0 + (keep >= 0) + len(later)
                terms = [(f, -1.0), (rt(k), 1.0)] + [(c, -1.0) for c in later]
                if keep >= 0:
                    terms.append((keep, -1.0))
                md.row(-inf, 0.0, terms)
                terms = [(f, kappa), (rt(k), -1.0)] + [(c, 1.0) for c in later]
                if keep >= 0:
                    terms.append((keep, 1.0))
                md.row(-inf, kappa - 1.0, terms)
    md.scale = cs  # type: ignore[attr-defined]
    return md


def solve_scipy(g: Graph, budget: int, time_limit: float) -> tuple[float, float | None, str]:
    """Builds and solves; returns (seconds including the build, cost in graph units,
    status)."""
    began = time.perf_counter()
    md = build(g, budget)
    ri, ci, vals = [], [], []
    for r, terms in enumerate(md.rows):
        for c, v in terms:
            ri.append(r)
            ci.append(c)
            vals.append(v)
    a = coo_matrix((vals, (ri, ci)), shape=(len(md.rows), len(md.c))).tocsr()
    res = milp(
        c=np.array(md.c),
        constraints=LinearConstraint(a, np.array(md.rlo), np.array(md.rhi)),
        integrality=np.array(md.integer),
        bounds=Bounds(np.array(md.lo), np.array(md.hi)),
        options={"time_limit": time_limit, "disp": False},
    )
    took = time.perf_counter() - began
    cost = None if res.x is None else float(res.fun) * md.scale  # type: ignore[attr-defined]
    status = "optimal" if res.status == 0 else res.message.split(".")[0]
    return took, cost, status


def solve_remat(binary: str, graph: Path, budget: str, time_limit: float) -> dict:
    began = time.perf_counter()
    out = subprocess.run(
        [binary, "solve", str(graph), "--budget", budget, "--solver", "milp",
         "--time-limit", str(time_limit), "--json"],
        check=True, capture_output=True, text=True,
    )
    took = time.perf_counter() - began
    result = json.loads(out.stdout)
    result["wall_s"] = took
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--remat", default=str(ROOT / "target/release/remat"))
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("cases", nargs="*", default=DEFAULT_CASES, help="graph@budget")
    args = ap.parse_args()
    print("| case | remat s | remat cost | remat status | scipy s | scipy cost | scipy status | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    total_remat = total_scipy = 0.0
    for case in args.cases:
        path, budget = case.rsplit("@", 1)
        graph = Path(path)
        ours = solve_remat(args.remat, graph, budget, args.time_limit)
        budget_bytes = int(ours["budget"])
        g = load(graph)
        took, cost, status = solve_scipy(g, budget_bytes, args.time_limit)
        stats = ours.get("stats") or {}
        total_remat += ours["wall_s"]
        total_scipy += took
        print(
            f"| {graph.stem} @ {budget} | {ours['wall_s']:.2f} | {stats.get('total_cost')} "
            f"| {ours.get('status')} | {took:.2f} | {cost} | {status} "
            f"| {ours['wall_s'] / took:.2f} |"
        )
    print(f"| total | {total_remat:.2f} | | | {total_scipy:.2f} | | | {total_remat / total_scipy:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
