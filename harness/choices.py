"""The valid values of every axis of the matrix, and the errors that name them.

Every user-facing name (workload, framework, size, dtype, device, mode) is checked
here, so a typo anywhere gets the same error listing what would have been accepted.
"""

SIZES = ("tiny", "small", "paper")
DTYPES = ("float32", "float64")
DEVICES = ("cpu", "cuda")
MODES = ("eager", "compiled")
#: how float32 matrix products run on a GPU (--matmul-precision): "highest" is full float32 in
#: every framework, so gradients agree and times compare like with like; "tf32" the tensor cores
MATMUL_PRECISIONS = ("highest", "tf32")
OPTIMIZERS = ("sgd", "adam")


class ChoiceError(ValueError):
    """A name that is not one of the valid choices; the message lists them."""


class WorkloadError(ChoiceError):
    """A workload module that cannot be loaded or breaks the contract (exit 2): an op-set
    file (harness/workloads/loader.py) or a native step (harness/steps/contract.py)."""


def check_choice(kind, value, valid):
    """Return `value` if it is in `valid`, else raise ChoiceError naming the choices."""
    if value not in valid:
        raise ChoiceError(f"unknown {kind} {value!r}; valid {kind}s: {', '.join(valid)}")
    return value


def parse_choices(kind, text, valid):
    """Parse a comma-separated list ("a,b" or "all") into a list of valid names."""
    if text in (None, "", "all"):
        return list(valid)
    names = [name.strip() for name in text.split(",") if name.strip()]
    return [check_choice(kind, name, valid) for name in names]
