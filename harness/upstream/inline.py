"""A workload's code with one framework's ops inlined: plain framework source.

The op-set workload (harness/workloads/NAME.py) is read as source, never run: the
functions its ``init`` and ``loss`` need (and the module's constants they read) are
kept, and every ``ops.NAME(...)`` call in them is replaced by the framework's own
expression (emitters.py), bottom-up, so ``ops.tanh(ops.add(ops.matmul(h, W), b))``
becomes ``torch.tanh(h @ W + b)``. The ``ops`` parameter the workload threads through
its helpers is dropped from every definition and call. ``checkpoint(f, *xs)`` becomes
``f(*xs)`` and ``chain`` the plain loop (emitters.CHAIN): the sweep's cells ran no
remat. Comments are not kept (the AST has none); docstrings are.

`inlined(workload, framework)` returns the source and the helpers it calls.

The other form, ``form="functions"``, keeps every op a call of a small function:
``ops.add(x, y)`` becomes ``op_add(x, y)``, and ``def op_add(x, y): return x + y``
is among the helpers (`op_function`), one per op called, with the op's signature
(harness/ops.py). It is how gradmem runs a loss (the adapter's op table: a Python
function per op): a move that a tracer makes of a loss written through small functions
and not of the same loss inlined (torch.compile's Dynamo, one frame per call) shows in
this form and not in the other (docs/releases.md, "harness only").

The third, ``form="table"``, is gradmem's own: the workload's code as written, ``ops``
and all, called with the adapter's own op table (`op_table`: its ``_make_ops`` written
out, ``OPS = _make_ops(torch)``), the warm-up's loss too. What differs from the harness
then is only what measures it.
"""

import ast
import importlib
import inspect
import textwrap
import types

from harness.frameworks import remat as remat_lib
from harness.ops import OPS
from harness.upstream import emitters

#: the functions a script needs of a workload: the data and the loss
ENTRY_POINTS = ("init", "loss")
#: how the ops are written: each inlined as the framework's expression, or each a call of a small function
FORMS = ("inlined", "functions", "table")
#: the name of the op table in the "table" form (a helper the script defines after the others)
TABLE = "OPS"
#: the name of an op's function in the "functions" form
FUNCTION_PREFIX = "op_"


class InlineError(ValueError):
    """A workload the inliner cannot write as plain framework code (the message says where)."""


def signature(op):
    """[(parameter, default source or None)] of `op` from its signature in harness/ops.py."""
    text = OPS[op][0]
    node = ast.parse(f"def {text}: pass").body[0]
    args = node.args
    defaults = [None] * (len(args.args) - len(args.defaults)) + [ast.unparse(d) for d in args.defaults]
    params = [(a.arg, d) for a, d in zip(args.args, defaults)]
    if args.vararg:
        params.append(("*" + args.vararg.arg, None))
    return params


def _bind(op, call):
    """{parameter: source} of an ops call (keywords by name, defaults filled in)."""
    params = signature(op)
    found = {}
    positional = [p for p, _ in params if not p.startswith("*")]
    if len(call.args) > len(positional) or any(isinstance(a, ast.Starred) for a in call.args):
        raise InlineError(f"ops.{op} at line {call.lineno}: more positional arguments than {OPS[op][0]}")
    for name, arg in zip(positional, call.args):
        found[name] = ast.unparse(arg)
    for keyword in call.keywords:
        if keyword.arg not in positional or keyword.arg in found:
            raise InlineError(f"ops.{op} at line {call.lineno}: keyword {keyword.arg!r} does not fit {OPS[op][0]}")
        found[keyword.arg] = ast.unparse(keyword.value)
    for name, default in params:
        if name not in found:
            if default is None:
                raise InlineError(f"ops.{op} at line {call.lineno}: {name!r} missing ({OPS[op][0]})")
            found[name] = default
    return found


def _is_ops(node):
    return isinstance(node, ast.Name) and node.id == "ops"


def _pretty_index(node):
    """`x[(Ellipsis, slice(0, 3))]` written as `x[..., 0:3]`."""
    class Pretty(ast.NodeTransformer):
        def visit_Name(self, name):
            return ast.Constant(Ellipsis) if name.id == "Ellipsis" else name

        def visit_Call(self, call):
            self.generic_visit(call)
            if isinstance(call.func, ast.Name) and call.func.id == "slice" and not call.keywords and len(call.args) <= 3:
                parts = list(call.args) + [None] * (3 - len(call.args))
                if len(call.args) == 1:
                    parts = [None, call.args[0], None]
                lower, upper, step = (None if isinstance(p, ast.Constant) and p.value is None else p for p in parts)
                return ast.Slice(lower, upper, step)
            return call

    if isinstance(node, ast.Subscript):
        node.slice = Pretty().visit(node.slice)
    return node


def _general(framework, op):
    """(parameters as listed in a definition, body expression, helper or None) of `op`
    with its parameters as names: its signature from harness/ops.py, the framework's
    expression of it (emitters.emit's general form)."""
    params = signature(op)
    text, helper = emitters.emit(framework, op, {name: name for name, _ in params}, general=True)
    listed = ", ".join(name if default is None else f"{name}={default}" for name, default in params)
    return listed, ast.unparse(ast.parse(text, mode="eval")), helper  # (x) + (y) written as x + y


def op_function(framework, op):
    """(source, helper or None) of the "functions" form's definition of `op`."""
    listed, body, helper = _general(framework, op)
    return f"def {FUNCTION_PREFIX}{op}({listed}):\n    return {body}\n", helper


def op_table(framework):
    """The source of the "table" form's op table: the adapter's own op table, its
    ``_make_ops`` (harness/frameworks/<name>.py) written out as it is, with the
    module-level functions it reads, called as the adapter calls it; its `checkpoint`
    and `chain` the no-remat ones (harness/frameworks/remat.py; `chain` is the script's
    plain loop, emitters.CHAIN). Written out, not rebuilt from the emitters: how each op
    is written is the program Dynamo traces (``tanh=torch.tanh`` against ``lambda x:
    torch.tanh(x)``; torch 2.11.0 keeps ~4 MiB more for the adapter's table than for
    the lambdas on shared_linear, docs/releases.md)."""
    adapter = importlib.import_module(f"harness.frameworks.{framework}")
    make_ops = adapter._make_ops
    module_arg = next(iter(inspect.signature(make_ops).parameters))  # torch, jax, tf: the script's import
    parts = [inspect.getsource(remat_lib.checkpoint),
             "remat_lib = types.SimpleNamespace(checkpoint=checkpoint, chain=chain)  # no remat\n"]
    parts += [inspect.getsource(fn) for fn in _module_functions(adapter, make_ops)]
    parts.append(inspect.getsource(make_ops))
    parts.append(f"{TABLE} = _make_ops({module_arg})\n")
    return "\n\n".join(parts)


def _module_functions(module, func):
    """The functions of `module` that `func` reads (and they read), `func` left out, in
    the module's order."""
    found, todo = {}, [func]
    while todo:
        for name in _names_read(todo.pop().__code__):
            value = module.__dict__.get(name)
            if inspect.isfunction(value) and value is not func and value.__module__ == module.__name__ \
                    and name not in found:
                found[name] = value
                todo.append(value)
    return sorted(found.values(), key=lambda fn: fn.__code__.co_firstlineno)


def _names_read(code):
    """The global names `code` and the functions nested in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_read(const)
    return names


def helper_source(framework, name):
    """The definition a script carries of a helper `inlined` or `function` named: an op's
    function of the "functions" form, the op table of the "table" form, or an adapter's
    multi-line op (emitters.HELPERS)."""
    if name == TABLE:
        return op_table(framework)
    if name.startswith(FUNCTION_PREFIX):
        return op_function(framework, name[len(FUNCTION_PREFIX):])[0]
    return emitters.HELPERS[framework][name]


def helper_sources(framework, names):
    """The definitions of the helpers `names` (`helper_source`), in the order a script
    defines them: the op table last, since its entries name the others."""
    return [helper_source(framework, name) for name in sorted(set(names), key=lambda name: (name == TABLE, name))]


def _rewrite(nodes, framework, form):
    """(nodes, helpers, uses_chain) of op-set code in `form`: each ``ops.NAME(...)``
    inlined or a call of its small function (`_Inliner`), or, "table", the code as
    written, with the op table (and the `chain` it holds) among the helpers."""
    if form == "table":
        return nodes, {TABLE}, True
    inliner = _Inliner(framework, form)
    return [inliner.visit(node) for node in nodes], inliner.helpers, inliner.chain


def _check_form(form):
    if form not in FORMS:
        raise InlineError(f"form {form!r}: one of {', '.join(FORMS)}")


class _Inliner(ast.NodeTransformer):
    def __init__(self, framework, form="inlined"):
        _check_form(form)
        self.framework, self.form = framework, form
        self.helpers = set()
        self.chain = False

    def visit_Call(self, call):
        # a helper called with ops gets it no more; the arguments are inlined first (bottom-up)
        call.args = [self.visit(a) for a in call.args if not _is_ops(a)]
        call.keywords = [self.visit(k) for k in call.keywords]
        func = call.func
        if not (isinstance(func, ast.Attribute) and _is_ops(func.value)):
            call.func = self.visit(func)
            return call
        op = func.attr
        if op not in OPS:
            raise InlineError(f"ops.{op} at line {call.lineno} is not an op of the op set (harness/ops.py)")
        if op == "checkpoint":  # the plain call: f(*xs)
            if not call.args:
                raise InlineError(f"ops.checkpoint at line {call.lineno} has no function")
            return ast.copy_location(ast.Call(call.args[0], call.args[1:], call.keywords), call)
        if op == "chain":
            self.chain = True
            return ast.copy_location(ast.Call(ast.Name("chain", ast.Load()), call.args, call.keywords), call)
        if self.form == "functions":  # the call as written, of the op's own small function
            _bind(op, call)  # the arguments fit the op's signature
            _, helper = op_function(self.framework, op)
            self.helpers.update(h for h in (FUNCTION_PREFIX + op, helper) if h)
            return ast.copy_location(ast.Call(ast.Name(FUNCTION_PREFIX + op, ast.Load()), call.args, call.keywords),
                                     call)
        text, helper = emitters.emit(self.framework, op, _bind(op, call))
        if helper:
            self.helpers.add(helper)
        node = ast.parse(text, mode="eval").body
        return ast.copy_location(_pretty_index(node) if op == "getitem" else node, call)

    def _drop_ops(self, args):
        for field in ("posonlyargs", "args", "kwonlyargs"):
            setattr(args, field, [a for a in getattr(args, field) if a.arg != "ops"])

    def visit_FunctionDef(self, node):
        self._drop_ops(node.args)
        self.generic_visit(node)
        return node

    def visit_Lambda(self, node):
        self._drop_ops(node.args)
        self.generic_visit(node)
        return node

    def visit_Name(self, node):
        if node.id == "ops":
            raise InlineError(f"line {node.lineno}: `ops` used other than as ops.NAME(...) or passed on to a helper")
        return node


def _assigned(node):
    """The names a module-level assignment binds (`A = 1`, `NEAR, FAR = 2.0, 6.0`)."""
    return [n.id for target in node.targets for n in ast.walk(target) if isinstance(n, ast.Name)]


def _top_level(tree):
    """{name: node} of the module's functions and constants, and its imports."""
    defined, imports = {}, []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            defined[node.name] = node
        elif isinstance(node, ast.Assign):
            for name in _assigned(node):
                defined[name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
    return defined, imports


def _needed(defined, roots):
    """The module-level nodes `roots` reach through the names they read, in module order."""
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in defined:
            continue
        seen.add(name)
        todo += [n.id for n in ast.walk(defined[name]) if isinstance(n, ast.Name)]
    return seen


def inlined(module, framework, form="inlined"):
    """(source, helpers, uses_chain, imports) of `module`'s init and loss with
    `framework`'s ops inlined (or in another of FORMS: each a call of its own small
    function, or the code as written with the op table, named among the helpers):
    `imports` are the module's own import lines the
    kept code reads (math, numpy)."""
    if framework not in emitters.FRAMEWORKS:
        raise InlineError(f"no standalone scripts for {framework}: written for {', '.join(emitters.FRAMEWORKS)}")
    tree = ast.parse(textwrap.dedent(inspect.getsource(module)))
    defined, imports = _top_level(tree)
    missing = [name for name in ENTRY_POINTS if name not in defined]
    if missing:
        raise InlineError(f"{module.__name__} defines no {', '.join(missing)}")
    keep = _needed(defined, ENTRY_POINTS)
    nodes = []
    for node in tree.body:
        names = ([node.name] if isinstance(node, ast.FunctionDef) else
                 _assigned(node) if isinstance(node, ast.Assign) else [])
        if names and any(n in keep for n in names) and node not in nodes:
            nodes.append(node)
    body, helpers, chain = _rewrite(nodes, framework, form)
    read = {n.id for node in body for n in ast.walk(node) if isinstance(n, ast.Name)}
    used_imports = []
    for node in imports:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness"):
            continue  # gradmem's own helpers (itemsize): used by the bound only, not kept
        names = [(a.asname or a.name).split(".")[0] for a in node.names]
        if any(n in read for n in names):
            used_imports.append(ast.unparse(node))
    source = "\n\n\n".join(ast.unparse(ast.fix_missing_locations(node)) for node in body) + "\n"
    return source, sorted(helpers), chain, used_imports


def function(func, framework, name=None, form="inlined"):
    """(source, helpers, uses_chain) of one op-set function (``ops`` its first
    parameter, e.g. the runtime warm-up's loss) with `framework`'s ops inlined (or in
    `form`), named `name` (default: its own)."""
    node = ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
    if name:
        node.name = name
    [node], helpers, chain = _rewrite([node], framework, form)
    return ast.unparse(ast.fix_missing_locations(node)) + "\n", sorted(helpers), chain
