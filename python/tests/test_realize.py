"""`remat.realize.realized_events`: what the partitioned graphs run, as a remat schedule, on graphs
built by hand (no solve, no compile)."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx

from remat.realize import NODE, prediction_graph, realized_events


def _tuple_graph() -> dict[str, Any]:
    """x -> var_mean `t` (elements `v`, `m`) -> `y` = v + m; 4 bytes each."""
    node = {"cost": 1.0, "memory": 4}
    return {
        "nodes": [
            {"id": "t", "inputs": [], **node, "memory": 8},
            {"id": "v", "inputs": ["t"], **node, "meta": {"element": 0}},
            {"id": "m", "inputs": ["t"], **node, "meta": {"element": 1}},
            {"id": "y", "inputs": ["v", "m"], **node},
        ]
    }


def _var_mean(g: fx.Graph, x: fx.Node, take: int, node: str, copy: str) -> fx.Node:
    """A copy of `t` (named `t_<copy>`: names are unique across the two graphs, as the
    partitioner's) with only element `take` read, as the node `node`."""
    t = g.create_node("call_function", torch.ops.aten.var_mean.correction, (x,), name=f"t_{copy}")
    t.meta.update({NODE: "t", "val": (torch.empty(1), torch.empty(1))})
    element = g.create_node("call_function", operator.getitem, (t, take), name=f"{node}_{copy}")
    element.meta[NODE] = node
    return element


def test_an_untaken_element_of_a_recomputed_tuple_is_a_second_copy() -> None:
    """The forward keeps `m` (element 1 of `t`); the backward recomputes `t` for `v` while the
    saved `m` is alive. The recomputed tuple's `m`, which no getitem takes, is allocated by the op
    and lives as long as the tuple: a second copy of `m` (`m@copy1`), as a taken one would be."""
    fw = fx.Graph()
    x = fw.placeholder("x")
    m = _var_mean(fw, x, 1, "m", "fw")
    fw.output((m,))
    bw = fx.Graph()
    m_saved, x_bw = bw.placeholder(m.name), bw.placeholder("x")
    v = _var_mean(bw, x_bw, 0, "v", "bw")
    y = bw.call_function(torch.ops.aten.add.Tensor, (v, m_saved))
    y.meta[NODE] = "y"
    bw.output((y,))
    graph = _tuple_graph()
    events = realized_events(graph, fx.GraphModule({}, fw), fx.GraphModule({}, bw), 0)
    computed = [e["node"] for e in events if e["op"] == "compute"]
    # forward: t, its untaken `v`, the taken `m`; backward: t again, `v` and the new copy of `m`
    assert computed == ["t", "v", "m", "t", "v", "m@copy1", "y"], events
    freed = [e["node"] for e in events if e["op"] == "free"]
    assert freed.count("m@copy1") == 1 and "m" in freed[freed.index("m@copy1") :], events
    assert any(n["id"] == "m@copy1" for n in prediction_graph(graph, events)["nodes"])
