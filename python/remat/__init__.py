"""remat from PyTorch: export a training step as a graph, solve it, apply the schedule."""

from .errors import ApplyError, BudgetError, ExportError, InfeasibleBudget, RematError, SolveError
from .export import export, saved_for_backward

__all__ = [
    "ApplyError",
    "BudgetError",
    "ExportError",
    "InfeasibleBudget",
    "RematError",
    "SolveError",
    "export",
    "saved_for_backward",
]
