"""Train a model a few steps on CPU under a remat schedule at a budget; print predicted vs measured.

    python3 python/examples/train.py --model resnet18 --budget 0.7
    python3 python/examples/train.py --model gpt --budget 0.7 --server http://127.0.0.1:8080

The budget is a fraction of activation memory (see `remat.budget`), or bytes / "6GiB" / "80%".
Without --server the `remat` binary ($REMAT_BIN, PATH or target/debug/remat) solves.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import torch
from models import gpt_setup, resnet18_setup

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import remat
from remat.apply import applied, plan
from remat.measure import measure_step


def budget_arg(text: str) -> Any:
    if text.isdigit():
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["resnet18", "gpt"], default="resnet18")
    ap.add_argument("--budget", type=budget_arg, default=0.7)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--server", default=None, help="a remat serve URL; default: the remat binary")
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()

    torch.manual_seed(0)
    model, regions, inputs, loss_fn = resnet18_setup() if args.model == "resnet18" else gpt_setup()
    built = Path(__file__).resolve().parents[2] / "target/debug/remat"
    if not args.server and not os.environ.get("REMAT_BIN") and built.exists():
        os.environ["REMAT_BIN"] = str(built)
    backend = remat.backend(args.server)

    graph = remat.export(model, inputs, loss_fn, regions=regions)
    result = backend.solve(graph, args.budget, time_limit=args.time_limit)
    p = plan(graph, result, backend)
    mib = 1 / 2**20
    print(f"graph: {len(graph['nodes'])} nodes, fixed memory {graph['fixed_memory'] * mib:.1f} MiB")
    print(
        f"schedule ({result['solver']}): activations {(result['stats']['peak_memory'] - p.fixed_memory) * mib:.2f} MiB"
    )
    print(
        f"applied as SAC: predicted activations {p.predicted_activations * mib:.2f} MiB, "
        f"overhead {p.overhead:.3f}x, fits the budget: {p.fits}"
    )

    base = measure_step(model, inputs, loss_fn, repeats=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with applied(regions, p):
        for i in range(args.steps):
            step = measure_step(model, inputs, loss_fn, repeats=2)
            for param, grad in zip(model.parameters(), step.grads, strict=True):
                param.grad = grad
            opt.step()
            print(
                f"step {i}: loss {step.loss:.4f}  activations measured {step.activations * mib:.2f} MiB "
                f"(predicted {p.predicted_activations * mib:.2f})  time {step.seconds:.3f} s "
                f"(predicted {base.seconds * p.overhead:.3f}; "
                f"baseline {base.seconds:.3f}, {base.activations * mib:.2f} MiB)"
            )


if __name__ == "__main__":
    main()
