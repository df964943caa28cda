"""remat from PyTorch: export a training step as a graph, solve it, apply the schedule.

graph = remat.export(model, (x,), loss_fn)          # the joint forward + loss + backward graph
result = remat.solve_local(graph, "70%")             # or remat.Client(url).solve(graph, "70%")

The wheel (`pip install remat-*.whl`) carries the `remat` binary, which `remat.Local` finds.
"""

from .client import Client, Local, backend, solve_local
from .errors import (
    ApplyError,
    BudgetError,
    ExportError,
    InfeasibleBudget,
    NotPartitionedWarning,
    OverBudget,
    OverBudgetWarning,
    RematError,
    SolveError,
)
from .export import export, saved_for_backward

# Cargo.toml's version, which is the wheel's; the tests check it against `remat --version`
__version__ = "0.1.0"

__all__ = [
    "ApplyError",
    "BudgetError",
    "Client",
    "ExportError",
    "InfeasibleBudget",
    "Local",
    "NotPartitionedWarning",
    "OverBudget",
    "OverBudgetWarning",
    "RematError",
    "SolveError",
    "backend",
    "export",
    "saved_for_backward",
    "solve_local",
]
