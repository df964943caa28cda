"""Schedules applied in eager PyTorch (selective activation checkpointing): same loss and gradients
as the plain model, measured activation memory within 10% of the simulator's prediction."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from models import gpt_setup, resnet18_setup
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, SelectiveCheckpointContext, create_selective_checkpoint_contexts

import remat
from remat.apply import applied, plan
from remat.measure import measure_step

# REMAT_APPLY_TABLE=FILE appends each measured row (budget, predicted and measured peak and time)
TABLE = os.environ.get("REMAT_APPLY_TABLE")


def record(rows: list[dict[str, Any]]) -> None:
    if TABLE:
        with Path(TABLE).open("a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


@pytest.mark.parametrize("make", [resnet18_setup, gpt_setup], ids=["resnet18", "gpt"])
def test_applied_schedules_match_baseline_and_prediction(make: Any, binary: str) -> None:
    model, regions, inputs, loss_fn = make()
    backend = remat.Local(binary)
    graph = remat.export(model, inputs, loss_fn, regions=regions)
    base = measure_step(model, inputs, loss_fn, repeats=3)
    # the plain model runs the checkpoint-all schedule: its activations are the export's
    report = backend.inspect(graph)
    all_acts = report["checkpoint_all_peak"] - report["fixed_memory"]
    assert abs(base.activations - all_acts) <= 0.10 * all_acts, (base.activations, all_acts)
    rows = []
    for fraction in (1.0, 0.85, 0.7):
        result = backend.solve(graph, fraction, solver="auto", time_limit=5)
        p = plan(graph, result, backend)
        with applied(regions, p):
            step = measure_step(model, inputs, loss_fn, repeats=3)
        assert p.misses == [], p.misses[:5]
        assert p.fits, (fraction, p.predicted_peak, p.budget)
        assert step.loss == pytest.approx(base.loss, rel=1e-5)
        for g0, g1 in zip(base.grads, step.grads, strict=True):
            assert g0 is not None and g1 is not None
            torch.testing.assert_close(g1, g0, rtol=1e-5, atol=1e-6)
        assert abs(step.activations - p.predicted_activations) <= 0.10 * p.predicted_activations, (
            fraction,
            step.activations,
            p.predicted_activations,
        )
        overhead = float(p.predicted["stats"]["overhead"])
        rows.append(
            {
                "model": make.__name__,
                "budget": f"{fraction:.2f} of activations ({p.budget} B)",
                "schedule_peak": result["stats"]["peak_memory"] - p.fixed_memory,
                "predicted_activations": p.predicted_activations,
                "measured_activations": step.activations,
                "predicted_s": base.seconds * overhead,
                "measured_s": step.seconds,
                "baseline_s": base.seconds,
                "overhead": overhead,
            }
        )
    # lower budgets keep less
    assert rows[-1]["predicted_activations"] < rows[0]["predicted_activations"]
    record(rows)


def test_plan_without_regions_or_schedule_is_refused(binary: str) -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    x = torch.randn(2, 4)
    backend = remat.Local(binary)
    graph = remat.export(model, (x,), lambda out: out.sum())
    result = backend.solve(graph, 1.0)
    with pytest.raises(remat.ApplyError, match="no checkpoint regions"):
        plan(graph, result, backend)
    graph = remat.export(model, (x,), lambda out: out.sum(), regions=[model[0]])
    with pytest.raises(remat.ApplyError, match="no schedule"):
        plan(graph, {"status": "infeasible", "schedule": None}, backend)
    # the caller holds the model's output through backward, which the checkpoint-all peak (1.0)
    # does not count: on this 4-wide model that alone is over the budget
    with pytest.warns(remat.OverBudgetWarning):
        p = plan(graph, backend.solve(graph, 1.0), backend, on_overrun="warn")
    with pytest.raises(remat.ApplyError, match="1 regions, 2 modules"), applied([model[0], model[2]], p):
        pass


def test_plan_names_what_it_cannot_take(binary: str) -> None:
    """Another graph's result, a result that is not one, and a budget `plan` does not resolve
    are `RematError`s that say so; a float budget is a fraction of activation memory."""
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    x = torch.randn(2, 4)
    backend = remat.Local(binary)
    graph = remat.export(model, (x,), lambda out: out.sum(), regions=[model[0], model[2]])
    result = backend.solve(graph, 1.0)
    other = remat.export(nn.Sequential(nn.Linear(4, 4), nn.Tanh()), (x,), lambda out: out.sum())
    with pytest.raises(remat.ApplyError, match="which the graph does not have"):
        plan(graph, backend.solve(other, 1.0), backend)
    with pytest.raises(remat.ApplyError, match="NoneType, not a solve result"):
        plan(graph, None, backend)  # type: ignore[arg-type]
    with pytest.raises(remat.BudgetError, match="'6GiB': plan takes bytes"):
        plan(graph, result, backend, budget="6GiB")  # type: ignore[arg-type]
    report = backend.inspect(graph)
    fixed, peak = int(report["fixed_memory"]), int(report["checkpoint_all_peak"])
    p = plan(graph, result, backend, budget=0.5, on_overrun="warn")
    assert p.budget == fixed + int(0.5 * (peak - fixed))


def test_a_replay_is_answered_as_its_forward_was(binary: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some torch versions (2.11 among them) ask the SAC policy again as a region's replay runs
    each op (`ctx.is_recompute`) and take the cached output only where it answers MUST_SAVE
    again: the replay's answers must be the forward's, call for call. With one occurrence
    counter for both, every cached op ran again beside its cache (ResNet-18 on CUDA, torch
    2.11, at 0.8 of its activations: per-block checkpointing's FLOPs, 32,768 bytes over the
    prediction and the budget)."""
    model, regions, inputs, loss_fn = resnet18_setup()
    backend = remat.Local(binary)
    graph = remat.export(model, inputs, loss_fn, regions=regions)
    p = plan(graph, backend.solve(graph, 0.85, solver="auto", time_limit=5), backend)
    asked: list[tuple[Any, list[tuple[Any, CheckpointPolicy]]]] = []  # per region call: policy, (op, answer)s

    def recording(policy: Any) -> Any:
        answers: list[tuple[Any, CheckpointPolicy]] = []

        def forward(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
            answer: CheckpointPolicy = policy(ctx, op, *args, **kwargs)
            answers.append((op, answer))
            return answer

        asked.append((policy, answers))
        return create_selective_checkpoint_contexts(forward)

    monkeypatch.setattr("remat.apply.create_selective_checkpoint_contexts", recording)
    with applied(regions, p):
        loss_fn(model(*inputs)).backward()
    replay = SelectiveCheckpointContext(is_recompute=True)
    cached = 0
    for policy, answers in asked:
        assert [policy(replay, op) for op, _ in answers] == [a for _, a in answers]
        cached += sum(a == CheckpointPolicy.MUST_SAVE for _, a in answers)
    assert len(asked) == len(regions) and cached > 0, (len(asked), cached)
