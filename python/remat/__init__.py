"""remat from PyTorch: export a training step as a graph, solve it, apply the schedule.

graph = remat.export(model, (x,), loss_fn)          # the joint forward + loss + backward graph
result = remat.solve_local(graph, "70%")             # or remat.Client(url).solve(graph, "70%")
"""

from .client import Client, Local, backend, solve_local
from .errors import (
    ApplyError,
    BudgetError,
    ExportError,
    InfeasibleBudget,
    OverBudget,
    OverBudgetWarning,
    RematError,
    SolveError,
)
from .export import export, saved_for_backward

__all__ = [
    "ApplyError",
    "BudgetError",
    "Client",
    "ExportError",
    "InfeasibleBudget",
    "Local",
    "OverBudget",
    "OverBudgetWarning",
    "RematError",
    "SolveError",
    "backend",
    "export",
    "saved_for_backward",
    "solve_local",
]
