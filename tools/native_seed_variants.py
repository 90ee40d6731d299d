#!/usr/bin/env python
"""What explains a seed's native step against its op-set workload (docs/seeds.md, "The
seeds as written"): variants of the native step files that change one thing, and the
side-by-side timings and counts the section quotes.

    .venv/bin/python tools/native_seed_variants.py write DIR          # the variant step files
    .venv/bin/python -m harness run --workload DIR/seq2seq_gradfree.py --framework torch --size small --out v.jsonl
    .venv/bin/python tools/native_seed_variants.py side-by-side torch float32 adam 15 \\
        examples/steps/seq2seq_forum.py seq2seq_attention:eager          # A B A B in one process, medians
    .venv/bin/python tools/native_seed_variants.py nodes              # autograd nodes of both seq2seq steps
    .venv/bin/python tools/native_seed_variants.py tf-kept compiled   # what a tf.function step keeps, and gives back

Each variant is its native file with one textual change (VARIANTS: the lines replaced),
so a change to the file that the edit no longer matches fails loudly here.
"""

import argparse
import gc
import importlib.util
import os
import statistics
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = os.path.join(ROOT, "examples", "steps")

ZERO_GRAD_FIRST = '''    model.zero_grad()
    logits = model(state["src"], state["dec_in"])
    loss = state["criterion"](logits.reshape(-1, logits.shape[-1]), state["tgt"].reshape(-1))
    loss.backward()
    optimizer.step()
'''
ZERO_GRAD_LAST = '''    logits = model(state["src"], state["dec_in"])
    loss = state["criterion"](logits.reshape(-1, logits.shape[-1]), state["tgt"].reshape(-1))
    loss.backward()
    optimizer.step()
    model.zero_grad()  # variant: the gradients freed at the end of the step, not at its start
'''
OP_SET_LOSS = '''    flat = logits.reshape(-1, logits.shape[-1])  # variant: the op-set workload's loss
    log_probs = flat - torch.logsumexp(flat, dim=-1, keepdim=True)
    target_flat = torch.arange(flat.shape[0]) * flat.shape[1] + state["tgt"].reshape(-1)
    loss = -torch.index_select(log_probs.reshape(-1), 0, target_flat).mean()
'''
UPSAMPLE = '''        side = tf.shape(x)[1:3] * 2  # variant: the op-set workload's up path, nearest upsampling + a 3x3 conv
        up = conv2d(tf.image.resize(x, side, method="nearest"), filters * 2**level, 3, f"up{level}")'''
#: name -> (the native file, [(text in it, its replacement), ...])
VARIANTS = {
    "chained_dot_scaled.py": ("chained_dot_219.py", [
        ("    x = numpy.dot(x, x.T)", "    x = x / D**0.5  # variant: the op-set workload's x, N(0, 1/D): every z_i O(1)")]),
    "seq2seq_gradfree.py": ("seq2seq_forum.py", [(ZERO_GRAD_FIRST, ZERO_GRAD_LAST)]),
    "seq2seq_gradfree_oploss.py": ("seq2seq_forum.py", [
        (ZERO_GRAD_FIRST, ZERO_GRAD_LAST),
        ('    loss = state["criterion"](logits.reshape(-1, logits.shape[-1]), state["tgt"].reshape(-1))\n', OP_SET_LOSS)]),
    "unet_tf1_upsample.py": ("unet_tf1.py", [
        ('        up = conv2d_transpose(x, filters * 2**level, f"up{level}")', UPSAMPLE)]),
    "unet_tf1_upsample_nchw.py": ("unet_tf1.py", [
        # the op-set adapter's layout: NCHW maps, every conv and pool transposed to NHWC and back
        ('    return tf.nn.conv2d(x, w, strides=1, padding="SAME") + b\n',
         '    out = tf.nn.conv2d(tf.transpose(x, [0, 2, 3, 1]), w, strides=1, padding="SAME") + b\n'
         '    return tf.transpose(out, [0, 3, 1, 2])  # variant: NCHW maps, NHWC around the conv\n'),
        ('    channels = x.shape[-1]\n    with v1.variable_scope(name):\n        w = _variable("kernel", [kernel,',
         '    channels = x.shape[1]\n    with v1.variable_scope(name):\n        w = _variable("kernel", [kernel,'),
        ('        x = tf.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID")',
         '        x = tf.transpose(tf.nn.max_pool2d(tf.transpose(x, [0, 2, 3, 1]), ksize=2, strides=2, '
         'padding="VALID"), [0, 3, 1, 2])'),
        ('        up = conv2d_transpose(x, filters * 2**level, f"up{level}")\n'
         '        x = unet_block(tf.concat([up, skips[level]], axis=-1)',
         '        up = conv2d(tf.repeat(tf.repeat(x, 2, axis=2), 2, axis=3), filters * 2**level, 3, f"up{level}")\n'
         '        x = unet_block(tf.concat([up, skips[level]], axis=1)'),
        ('        image = v1.placeholder(dtype, shape=[None, None, None, 1])',
         '        image = v1.placeholder(dtype, shape=[None, 1, None, None])'),
        ('            logits = build_model(image, cfg["filters"], cfg["levels"])',
         '            logits = tf.transpose(build_model(image, cfg["filters"], cfg["levels"]), [0, 2, 3, 1])'),
        ('    feed = {image: rng.random(shape + (1,)).astype(cfg["dtype"]),',
         '    feed = {image: rng.random((cfg["N"], 1, cfg["HW"], cfg["HW"])).astype(cfg["dtype"]),'),
    ]),
}


def write(directory):
    os.makedirs(directory, exist_ok=True)
    for name, (source, edits) in VARIANTS.items():
        with open(os.path.join(STEPS, source), encoding="utf-8") as handle:
            text = handle.read()
        for old, new in edits:
            if text.count(old) != 1:
                raise SystemExit(f"{source} no longer holds the text {name} changes: {old.strip()[:80]!r}")
            text = text.replace(old, new)
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.write(text)
        print(os.path.join(directory, name))


def _load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def side_by_side(framework, dtype, optimizer, steps, items):
    """Median step time of each item, the items' steps alternated in one process: a
    native step file, or WORKLOAD:MODE (the harness's own Step of an op-set workload)."""
    from harness import frameworks, workloads
    from harness.measure.phases import NullMeter, Step

    runs = {}
    for item in items:
        if item.endswith(".py"):
            module = _load(item)
            state = module.setup(dict(module.SIZES["small"], device="cpu", dtype=dtype))
            runs[os.path.basename(item)] = lambda module=module, state=state: module.step(state)
        else:
            name, mode = item.split(":")
            adapter = frameworks.get(framework)
            adapter.load("cpu", mode)
            problem = workloads.build(name, "small", dtype)
            step = Step(adapter, problem.loss, adapter.from_numpy(problem.params), adapter.from_numpy(problem.inputs),
                        mode, None if optimizer == "none" else optimizer)
            runs[item] = lambda step=step: step.run(NullMeter())
    for run in runs.values():
        run(), run()  # warm-up: compiles, caches
    times = {key: [] for key in runs}
    for _ in range(steps):
        for key, run in runs.items():
            started = time.perf_counter()
            run()
            times[key].append(time.perf_counter() - started)
    for key, values in times.items():
        print(f"{key:<40} {statistics.median(values) * 1000:10.1f} ms (median of {steps})")


def nodes():
    """The autograd nodes of one forward of the forum seq2seq as written and of the op-set workload."""
    import collections

    from harness import frameworks, workloads

    def count(loss):
        seen, stack, kinds = set(), [loss.grad_fn], collections.Counter()
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            kinds[type(node).__name__] += 1
            stack.extend(parent for parent, _ in node.next_functions)
        return sum(kinds.values()), kinds.most_common(5)

    module = _load(os.path.join(STEPS, "seq2seq_forum.py"))
    state = module.setup(dict(module.SIZES["small"], device="cpu", dtype="float32"))
    logits = state["model"](state["src"], state["dec_in"])
    print("seq2seq_forum.py ", *count(state["criterion"](logits.reshape(-1, logits.shape[-1]), state["tgt"].reshape(-1))))
    adapter = frameworks.get("torch")
    adapter.load("cpu", "eager")
    problem = workloads.build("seq2seq_attention", "small", "float32")
    params = {k: v.requires_grad_(True) for k, v in adapter.from_numpy(problem.params).items()}
    print("seq2seq_attention", *count(problem.loss(adapter.ops, params, adapter.from_numpy(problem.inputs))))


def tf_kept(mode):
    """What the op-set unet step with Adam keeps between steps (own pages above the
    baseline after 3 steps), and what stays once the step object is deleted. Run it with
    the memory pass's environment: MALLOC_MMAP_THRESHOLD_=32768 TF_ONEDNN_USE_SYSTEM_ALLOCATOR=1."""
    from harness import frameworks, workloads
    from harness.measure import probes
    from harness.measure.phases import NullMeter, Step

    adapter = frameworks.get("tensorflow")
    adapter.load("cpu", mode)
    problem = workloads.build("unet", "small", "float32")
    params, inputs = adapter.from_numpy(problem.params), adapter.from_numpy(problem.inputs)

    def own():
        probes.settle()
        found = probes.status_bytes()
        return (found["RssAnon"] + found.get("RssShmem", 0)) / 2**20

    baseline = own()
    step = Step(adapter, problem.loss, params, inputs, mode, "adam")
    for _ in range(3):
        step.run(NullMeter())
    kept = own() - baseline
    del step
    gc.collect()
    print(f"{mode}: kept after 3 steps {kept:.2f} MiB; after deleting the step {own() - baseline:.2f} MiB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("write").add_argument("directory")
    sbs = sub.add_parser("side-by-side")
    for name in ("framework", "dtype", "optimizer"):
        sbs.add_argument(name)
    sbs.add_argument("steps", type=int)
    sbs.add_argument("items", nargs="+")
    sub.add_parser("nodes")
    sub.add_parser("tf-kept").add_argument("mode", choices=("eager", "compiled"))
    args = parser.parse_args()
    if args.what == "write":
        write(args.directory)
    elif args.what == "side-by-side":
        side_by_side(args.framework, args.dtype, args.optimizer, args.steps, args.items)
    elif args.what == "nodes":
        nodes()
    else:
        tf_kept(args.mode)


if __name__ == "__main__":
    main()
