"""The AOTAutograd partitioner: same loss and gradients as the plain model, measured activation
memory within 10% of the simulator's report on what the partitioned graphs run."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from functorch.compile import aot_module
from models import gpt_setup, resnet18_setup
from test_apply import record
from torch._dynamo.backends.debugging import boxed_nop

import remat
from remat.compiled import Partitioner
from remat.measure import measure_step


@pytest.mark.parametrize("make", [resnet18_setup, gpt_setup], ids=["resnet18", "gpt"])
def test_partitioned_schedules_match_baseline_and_prediction(make: Any, binary: str) -> None:
    model, _, inputs, loss_fn = make()
    backend = remat.Local(binary)
    base = measure_step(model, inputs, loss_fn, repeats=2)
    rows = []
    for fraction in (1.0, 0.7, 0.5):
        part = Partitioner(fraction, backend, solver="sethi-ullman")
        compiled = aot_module(model, fw_compiler=boxed_nop, bw_compiler=boxed_nop, partition_fn=part)
        step = measure_step(compiled, inputs, loss_fn, repeats=2)
        assert part.last is not None
        assert step.loss == pytest.approx(base.loss, rel=1e-5)
        for g0, g1 in zip(base.grads, step.grads, strict=True):
            assert g0 is not None and g1 is not None
            torch.testing.assert_close(g1, g0, rtol=1e-5, atol=1e-6)
        predicted = part.last.predicted_activations
        assert abs(step.activations - predicted) <= 0.10 * predicted, (fraction, step.activations, predicted)
        fixed = part.last.graph["fixed_memory"]
        rows.append(
            {
                "model": f"{make.__name__.removesuffix('_setup')} (compiled)",
                "budget": f"{fraction:.2f} of activations",
                "schedule_peak": part.last.result["stats"]["peak_memory"] - fixed,
                "predicted_activations": predicted,
                "measured_activations": step.activations,
                "predicted_s": base.seconds * float(part.last.predicted["stats"]["overhead"]),
                "measured_s": step.seconds,
                "baseline_s": base.seconds,
                "overhead": float(part.last.predicted["stats"]["overhead"]),
            }
        )
    assert rows[-1]["measured_activations"] < rows[0]["measured_activations"]
    record(rows)
