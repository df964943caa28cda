"""Issue 25's "answers in seconds": the wall time of export + solve + plan at default settings, and
the schedule's extra compute against a 60 s solve (`effort="time"`, `time_limit=60`).

Per model family (`families.py`) at one activation fraction: seconds of `remat.export`, of
`remat.solve_local` with the default settings (auto, deterministic effort), of `remat.apply.plan`,
their sum; the graph's nodes; the schedule's recomputation overhead (cost over the cost of
computing every node once, in %) at default settings and after 60 s, and their difference in
percentage points.

    REMAT_BIN=/path/to/release/remat python3 python/benchmarks/speed.py [--models llama,bert] [--fraction 0.5]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import families

import remat
from remat.apply import plan


def overhead(result: dict[str, Any]) -> float:
    """Extra compute of the schedule, in % of computing every node once (the result's
    `stats.overhead`, cost over Σ_v c_v)."""
    return 100.0 * (float(result["stats"]["overhead"]) - 1.0)


def children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes (the remat binary)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(families.FAMILIES))
    ap.add_argument("--fraction", type=float, default=0.5)
    ap.add_argument("--long", type=float, default=60.0, help="the reference solve's time limit (s)")
    args = ap.parse_args()
    backend = remat.Local()
    print(f"binary {backend.binary}, load average {os.getloadavg()[0]:.1f} at start, fraction {args.fraction}")
    print(
        "| model | nodes | export s | solve s | plan s | total s | total CPU s | ended by | overhead % "
        "| 60 s overhead % | pt |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        torch.manual_seed(0)
        model, regions, inputs, loss_fn = families.as_setup(families.FAMILIES[name]())
        t0, c0, k0 = time.perf_counter(), time.process_time(), children_cpu()
        graph = remat.export(model, inputs, loss_fn, regions=regions)
        t1 = time.perf_counter()
        try:
            result = backend.solve(graph, args.fraction)
        except remat.InfeasibleBudget as e:
            print(f"| {name} | {len(graph['nodes'])} | {t1 - t0:.2f} | infeasible at {args.fraction}: {str(e)[:80]} |")
            continue
        t2 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a plan over the budget: its time counts all the same
            plan(graph, result, backend, on_overrun="warn")
        t3, cpu = time.perf_counter(), time.process_time() - c0 + children_cpu() - k0
        ended = (result.get("details") or {}).get("ended_by", result.get("ended_by", "-"))
        long = backend.solve(graph, args.fraction, effort="time", time_limit=args.long)
        fast, slow = overhead(result), overhead(long)
        print(
            f"| {name} | {len(graph['nodes'])} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} | {t3 - t0:.2f} | "
            f"{cpu:.2f} | {ended} | "
            f"{fast:.2f} | {slow:.2f} | {fast - slow:+.2f} |",
            flush=True,
        )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
