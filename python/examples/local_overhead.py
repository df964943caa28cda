"""What `remat.Local` pays per call beyond remat's own work: a process start and the graph as a
JSON file. Prints a table: median wall time of `Local().inspect` (remat's cheapest call) and of
`json.dumps`, on bundled graphs and on linear chains of 1,001 and 10,001 nodes.

    python3 python/examples/local_overhead.py     # the binary remat.Local() finds (the wheel's)
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import remat

REPO = Path(__file__).resolve().parents[2]


def chain(n: int) -> dict[str, Any]:
    """n forward nodes, a loss, n backward nodes: the shape of graphs/linear-8.json."""
    nodes = [
        {"id": str(i), "cost": 1.0, "memory": 1, "inputs": [str(i - 1)] if i else [], "kind": "forward"}
        for i in range(n)
    ]
    nodes.append({"id": "loss", "cost": 1.0, "memory": 1, "inputs": [str(n - 1)], "kind": "loss"})
    prev = "loss"
    for i in reversed(range(n)):
        nodes.append({"id": f"b{i}", "cost": 1.0, "memory": 1, "inputs": [str(i), prev], "kind": "backward"})
        prev = f"b{i}"
    return {"name": f"linear-{n}", "fixed_memory": 0, "cost_unit": "op", "nodes": nodes}


def main() -> None:
    local = remat.Local()
    print(f"binary {local.binary}")
    graphs = [
        ("graphs/tiny-residual.json", json.loads((REPO / "graphs/tiny-residual.json").read_text())),
        ("graphs/pytorch/resnet50.json", json.loads((REPO / "graphs/pytorch/resnet50.json").read_text())),
        ("linear chain", chain(500)),
        ("linear chain", chain(5000)),
    ]
    print("| graph | nodes | JSON bytes | json.dumps ms | Local().inspect ms, median of 9 |")
    print("|---|---|---|---|---|")
    for name, g in graphs:
        start = time.perf_counter()
        text = json.dumps(g)
        dumps = (time.perf_counter() - start) * 1e3
        walls = []
        for _ in range(9):
            start = time.perf_counter()
            local.inspect(g)
            walls.append((time.perf_counter() - start) * 1e3)
        print(f"| {name} | {len(g['nodes'])} | {len(text)} | {dumps:.1f} | {statistics.median(walls):.1f} |")


if __name__ == "__main__":
    main()
