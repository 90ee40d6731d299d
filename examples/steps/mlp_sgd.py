"""mlp_sgd: a two-layer MLP with plain SGD, in PyTorch: `harness new-step`'s torch template as it is.

The native step the independent measurement (tools/independent/torch_native_step.py)
and the release sweep of docs/workloads.md were checked on.

A gradmem native step (the contract: harness/steps/__init__.py; a guide: docs/workloads.md,
"Your own training step"). gradmem calls setup(cfg) once, before its baseline, then
step(state) for the cold first step and the steady ones, each measured as one call.
Measure it:

    python -m harness run --workload examples/steps/mlp_sgd.py --framework torch --size small --out r.jsonl
"""

import torch

FRAMEWORK = "torch"  # the row it runs in; in every other row it is not a cell
SOURCE = "harness new-step --framework torch (the template, unedited)"
# One config per size (tiny for tests, small by default, paper optional). setup() gets a
# copy with the cell's "device" ("cpu" | "cuda") and "dtype" ("float32" | "float64") added.
SIZES = {
    "tiny": {"B": 4, "D": 8, "H": 16},
    "small": {"B": 256, "D": 256, "H": 1024},
}
BATCH_AXIS = "B"  # the config key `harness scale` varies
LR = 1e-3


def setup(cfg):
    """The model, the optimizer and the data: made before the baseline, so they are in
    no step's peak (what the first step adds, e.g. Adam's moments, is in retained)."""
    torch.manual_seed(0)
    device, dtype = torch.device(cfg["device"]), getattr(torch, cfg["dtype"])
    B, D, H = cfg["B"], cfg["D"], cfg["H"]
    model = torch.nn.Sequential(torch.nn.Linear(D, H), torch.nn.ReLU(), torch.nn.Linear(H, D)).to(device, dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    x = torch.randn(B, D, device=device, dtype=dtype)
    y = torch.randn(B, D, device=device, dtype=dtype)
    return {"model": model, "optimizer": optimizer, "x": x, "y": y}


def step(state):
    """One training step: what gradmem measures."""
    state["optimizer"].zero_grad()
    loss = torch.nn.functional.mse_loss(state["model"](state["x"]), state["y"])
    loss.backward()
    state["optimizer"].step()
    return loss.detach()  # on CUDA the adapter synchronises the device after each step


def bound_bytes(cfg):
    """Optional: the bytes the step must keep for its backward, derived by hand (without
    it a record's bound is absent). Here: the hidden activation relu(x W1 + b1) (B, H),
    read by relu's gradient and W2's, and the output (B, D), read by the loss's."""
    itemsize = 4 if cfg["dtype"] == "float32" else 8
    return cfg["B"] * (cfg["H"] + cfg["D"]) * itemsize
