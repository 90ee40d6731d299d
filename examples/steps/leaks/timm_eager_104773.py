"""pytorch#104773's control: the same timm training minibatch, eager (no torch.compile).

The report (torch 2.0.1, CUDA 11.7 build, the newest timm of July 2023): classification
models from timm trained with `torch.compile(model)` use more host RAM with every
minibatch until the OS kills the process; the same loop without `torch.compile` stays
flat. Its script (attached to the issue, not in the text available here) is PyTorch's
transfer-learning tutorial with a small timm network, tinynet: this is that tutorial's
training minibatch, as the tutorial writes it, on `timm.create_model("tinynet_e",
pretrained=False, num_classes=2)` (no weights are downloaded; the leak the report
describes is in the model's call, whatever its weights), compiled with
`torch.compile(model)` in timm_compiled_104773.py and not here: this file is the
report's control, which it says stays flat. A minibatch is new random images and
labels each step, as a DataLoader hands the loop new tensors. One gradmem step is one
minibatch.

timm is not part of gradmem's environments: the release's environment is built with
it (tools/leak_reports/build_env.py --with timm==0.9.2 --with torchvision==X) in a
cache of its own, and torch 2.0's torch.compile needs Python 3.10 (docs/seeds.md,
"Leak reports").
"""

import timm
import torch
import torch.nn as nn
import torch.optim as optim

FRAMEWORK = "torch"
SOURCE = ("github.com/pytorch/pytorch/issues/104773 (VarIr): PyTorch's transfer-learning tutorial's training "
          "minibatch on timm tinynet_e, eager (the control), random images")
COMPILE = False
MODEL = "tinynet_e"  # timm's smallest tinynet (2.0 M parameters, 106 px by design)
# B: images a minibatch, HW: their side in pixels, CLASSES: the tutorial's two (ants, bees).
# small is 64 px: about 0.25 s a step on one CPU thread, so the leak phase's seconds hold
# its readings (106 px takes twice that)
SIZES = {
    "tiny": {"B": 2, "HW": 32, "CLASSES": 2},
    "small": {"B": 8, "HW": 64, "CLASSES": 2},
}
BATCH_AXIS = "B"


def setup(cfg):
    torch.manual_seed(0)
    device, dtype = torch.device(cfg["device"]), getattr(torch, cfg["dtype"])
    model = timm.create_model(MODEL, pretrained=False, num_classes=cfg["CLASSES"]).to(device, dtype)
    if COMPILE:
        model = torch.compile(model)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)  # the tutorial's
    return {"model": model, "criterion": criterion, "optimizer": optimizer, "cfg": cfg, "device": device,
            "dtype": dtype, "running_loss": 0.0, "running_corrects": 0}


def step(state):
    cfg, model = state["cfg"], state["model"]
    # a new minibatch, as the DataLoader gives one
    inputs = torch.rand(cfg["B"], 3, cfg["HW"], cfg["HW"], device=state["device"], dtype=state["dtype"])
    labels = torch.randint(0, cfg["CLASSES"], (cfg["B"],), device=state["device"])
    model.train()
    state["optimizer"].zero_grad()
    with torch.set_grad_enabled(True):
        outputs = model(inputs)
        _, preds = torch.max(outputs, 1)
        loss = state["criterion"](outputs, labels)
        loss.backward()
        state["optimizer"].step()
    # the tutorial's statistics, kept across minibatches
    state["running_loss"] += loss.item() * inputs.size(0)
    state["running_corrects"] += torch.sum(preds == labels.data)
    return loss.detach()
