"""The acceptance table's own helpers (`benchmarks/faithful.py`)."""

from __future__ import annotations

import faithful
import torch


def test_mismatch_names_the_tensor_furthest_outside_its_tolerance() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    grads = [torch.ones_like(p) for p in model.parameters()]
    buffers = [b.detach().clone() for b in model.buffers()]
    base = {"loss": 1.0, "grads": [g.clone() for g in grads], "buffers": [b.clone() for b in buffers]}
    grads[2] = grads[2] + 3e-4  # BatchNorm's weight: 3e-4 over a tolerance of 1e-5 + 1e-4 * 1
    assert faithful.mismatch(model, 1.0, grads, buffers, base) == (
        "grad 1.weight: max |diff| 0.0003, 2.73x the tolerance"
    )
    buffers[0] = buffers[0] + 1e-3  # the running mean: 1e-3 over 1e-6 + 1e-5 * 0
    assert faithful.mismatch(model, 1.0, grads, buffers, base).startswith("buffer 1.running_mean:")
    buffers[2] = buffers[2] + 1  # an integer buffer differs or not, no tolerance
    assert faithful.mismatch(model, 1.0, grads, buffers, base) == "buffer 1.num_batches_tracked differs"
