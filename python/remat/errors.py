"""The exceptions the package raises. Every message names the model, field, node or value at fault."""

from __future__ import annotations

import warnings
from typing import Any, Literal

OnOverrun = Literal["raise", "warn"]
"""What to do when what will run does not fit: raise `OverBudget`, or warn and run."""


class RematError(Exception):
    """The base of every error raised by `remat` (but `TypeError` for a keyword argument a call
    does not take, as Python raises for its own calls)."""


class ExportError(RematError):
    """The model could not be exported as a training graph (untraceable model, bad loss, bad input)."""


class BudgetError(RematError, ValueError):
    """A budget that is neither bytes, a size, a percentage nor a fraction of activation memory."""


class SolveError(RematError):
    """The solver answered with a problem document, or found no schedule within the budget.

    `problem` holds the server's RFC 9457 document (or the CLI's message as `detail`); `status` its
    HTTP status (or the CLI's exit code); `result` the solve result when there is one (e.g. an
    `infeasible` answer); `retry_after` the seconds a busy service asked to wait before asking
    again (503 with `Retry-After`), else None.
    """

    def __init__(
        self,
        message: str,
        *,
        problem: dict[str, Any] | None = None,
        status: int | None = None,
        result: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.problem = problem or {}
        self.status = status
        self.result = result
        self.retry_after = retry_after


class InfeasibleBudget(SolveError):
    """No schedule fits the budget (the solve result's status is `infeasible` or `no_solution`)."""


class OverBudget(RematError):
    """What will run does not fit the budget: remat's simulator predicts `predicted` bytes (peak,
    `fixed_memory` included) for the schedule PyTorch will run, above `budget`.

    Raised by default wherever remat knows it before the step runs (`remat.apply.plan`, the compiled
    partitioner); `on_overrun="warn"` turns it into an `OverBudgetWarning` and lets the step run.
    """

    def __init__(self, message: str, *, budget: int, predicted: int) -> None:
        super().__init__(message)
        self.budget = budget
        self.predicted = predicted


class NotPartitionedWarning(UserWarning):
    """`remat.inductor.partitioning` closed without partitioning anything: the code run inside was
    compiled before it, without the budget."""


class OverBudgetWarning(UserWarning):
    """The opt-out form of `OverBudget` (`on_overrun="warn"`): the step runs over the budget."""


def overrun(message: str, *, budget: int, predicted: int, on_overrun: OnOverrun) -> None:
    """Raise `OverBudget`, or warn with `OverBudgetWarning` where the caller chose `"warn"`
    (the warning names the caller's caller: the user's call into remat). `message` says what does
    not fit and what would; this adds what `on_overrun` does."""
    if on_overrun == "raise":
        raise OverBudget(f"{message}; or pass on_overrun='warn' to run over it", budget=budget, predicted=predicted)
    warnings.warn(OverBudgetWarning(f"{message}; running over it (on_overrun='warn')"), stacklevel=4)


class ApplyError(RematError, ValueError):
    """A schedule could not be applied to the model (the graph and the model disagree, the result is
    another graph's), or an argument of `plan` or `compile` is none of its values."""
