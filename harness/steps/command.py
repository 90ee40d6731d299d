"""`python -m harness new-step PATH --framework NAME`: write a native step that runs as it is.

The file is one training step of a small MLP with SGD in that framework
(harness/steps/templates.py): edit its setup() and step() into your own, then

    python -m harness run --workload PATH --framework NAME --size small --out r.jsonl

docs/workloads.md, "Your own training step", walks through it.
"""

import os
import re

from harness.choices import ChoiceError
from harness.steps import templates


def add_arguments(parser):
    parser.add_argument("path", help="the file to write (NAME.py); NAME is a Python identifier")
    parser.add_argument("--framework", default="torch",
                        help=f"{'|'.join(templates.TEMPLATES)}: the framework the step is written in (default torch)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")


def main(args):
    if args.framework not in templates.TEMPLATES:
        why = (" (the reference engine has no API outside the op set: write an op-set workload with "
               "`harness new-workload`)" if args.framework == "reference" else "")
        raise ChoiceError(f"new-step --framework {args.framework!r}: no template{why}; valid frameworks: "
                          f"{', '.join(templates.TEMPLATES)}")
    path = args.path if args.path.endswith(".py") else args.path + ".py"
    name = os.path.basename(path)[:-3]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ChoiceError(f"new-step {args.path!r}: the file's name must be a Python identifier, e.g. my_step.py")
    if os.path.exists(path) and not args.force:
        raise ChoiceError(f"new-step: {path} exists (--force overwrites it)")
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(templates.render(args.framework, name, path))
    except OSError as err:
        raise ChoiceError(f"new-step: cannot write {path}: {err.strerror or err}") from None
    print(f"wrote {path}; next: python -m harness run --workload {path} --framework {args.framework} --size tiny "
          f"--out r.jsonl")
    return 0
