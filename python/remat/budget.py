"""Budgets as remat takes them, and the one it does not: a fraction of activation memory.

- `int`: bytes, `fixed_memory` included (what the peak must not exceed).
- `"6GiB"`, `"512MB"`: a size (KB/MB/GB powers of 1000, KiB/MiB/GiB of 1024), `fixed_memory` included.
- `"80%"`: a percentage of the checkpoint-all peak (the peak of computing every node once and
  freeing each output after its last use), `fixed_memory` included. Resolved by remat.
- `float` f in [0, 1]: a fraction of *activation* memory, as `torch._functorch.config.
  activation_memory_budget` users think of it: `fixed_memory + f * (checkpoint_all_peak -
  fixed_memory)`. 1.0 is the checkpoint-all peak, 0.0 is `fixed_memory` alone (infeasible: some
  activation must be resident). Resolved here to bytes from the graph's `inspect` figures. (torch's
  knob scales the bytes its min-cut partitioner would save; both scale what is kept beyond the
  fixed state, from a different reference plan.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import BudgetError

Budget = int | float | str

MAX_BYTES = 2**53


def check(budget: Budget) -> None:
    """A `BudgetError` where `budget` is of no budget's type or out of its range (a string is
    parsed by remat)."""
    if isinstance(budget, bool):
        raise BudgetError(f"budget {budget!r}: a bool is not a budget")
    if isinstance(budget, int):
        if not 0 <= budget <= MAX_BYTES:
            raise BudgetError(f"budget {budget} bytes: must be between 0 and 2^53")
    elif isinstance(budget, float):
        if not 0.0 <= budget <= 1.0:
            raise BudgetError(
                f"budget {budget}: a float is a fraction of activation memory in [0, 1]; "
                "write bytes as an int, or a percentage of the checkpoint-all peak as '80%'"
            )
    elif isinstance(budget, str):
        if not budget.strip():
            raise BudgetError("budget '': empty")
    else:
        raise BudgetError(
            f"budget of type {type(budget).__name__}: give bytes (int), '6GiB', '80%' or a fraction (float)"
        )


def resolve(budget: Budget, inspect: Callable[[], dict[str, Any]]) -> int | str:
    """The budget to send to remat: bytes or a string remat parses; `inspect()` is called for fractions."""
    check(budget)
    if isinstance(budget, float):
        report = inspect()
        fixed = int(report["fixed_memory"])
        peak = int(report["checkpoint_all_peak"])
        return fixed + int(budget * (peak - fixed))
    if isinstance(budget, str):
        return budget.strip()
    return budget
