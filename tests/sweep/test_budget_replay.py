"""The H200's `--budget 370` resume that recorded 0 of 72 cells, replayed on the simulated
GPU of test_budget.py with the walls its logs measured
(results/gpu/2026-11-26-h200-resume/): under the rules of that run it records nothing
again, under today's it records cells steadily.

What the run did: 72 cells left by an earlier budget run (transformer_block small eager
in JAX and tinygrad, small compiled in torch, JAX and tinygrad, then paper), 8 memory
passes side by side on 16 cores, a 356 s sweep. Its cost table said a JAX compiled
memory pass takes 17 s; 8 side by side they took 46-241 s. The time passes set up from
86 s on and waited at their gate behind those passes until the budget: 0 records.
"""

from types import SimpleNamespace

import pytest

from harness.sweep import budget, cells, schedule
from harness.sweep.budget import Budget, BudgetSpent, CostTable
from harness.sweep.cell_runner import Options
from test_budget import Clock, Runner, SimulatedGpu

FRAMEWORKS = ("torch", "jax", "reference", "tinygrad")
WORKLOADS = ("chained_dot", "rnn_fanout", "unet", "tiny_nerf", "seq2seq_attention", "shared_linear",
             "transformer_block")
#: the sweep's share of `GRADMEM_GPU_BUDGET=370` (budget-resume.log: "356.0 s for the sweep")
SWEEP_S = 356.0

#: Memory-pass walls (s) as they ran, 8 side by side. budget-resume.log's "slowest
#: passes" give the 8 longest; its schedule line says the 25 memory passes worked 1261 s
#: in all. torch and tinygrad compiled small: the same machine's next run of them, 8 side
#: by side (schedule-compiled.log), each under the log's 8th slowest (43.4 s); paper eager
#: reference and torch chained_dot: their records (cuda-paper-eager.jsonl); rnn_fanout
#: torch compiled ran alone from 8 s to 37 s. The four no log names (JAX compiled
#: rnn_fanout, unet, shared_linear; tinygrad eager transformer_block) share what is left
#: of the 1261 s (95 s), 3:3:3:1 (tinygrad eager costs a third of JAX compiled in the
#: budget run before: 21.4 s against 56 s or more).
MEMORY_S = {
    ("transformer_block", "jax", "compiled", "small"): 241.5,
    ("transformer_block", "jax", "eager", "small"): 208.3,
    ("seq2seq_attention", "jax", "compiled", "small"): 158.8,
    ("tiny_nerf", "jax", "compiled", "small"): 94.7,
    ("seq2seq_attention", "torch", "compiled", "small"): 62.8,
    ("seq2seq_attention", "tinygrad", "compiled", "small"): 52.4,
    ("chained_dot", "jax", "compiled", "small"): 46.2,
    ("rnn_fanout", "tinygrad", "compiled", "small"): 43.4,
    ("rnn_fanout", "torch", "compiled", "small"): 28.5,
    ("unet", "torch", "compiled", "small"): 26.8,
    ("unet", "tinygrad", "compiled", "small"): 19.2,
    ("tiny_nerf", "torch", "compiled", "small"): 33.1,
    ("tiny_nerf", "tinygrad", "compiled", "small"): 9.0,
    ("chained_dot", "torch", "compiled", "small"): 20.2,
    ("chained_dot", "tinygrad", "compiled", "small"): 9.9,
    ("transformer_block", "torch", "compiled", "small"): 30.8,
    ("transformer_block", "tinygrad", "compiled", "small"): 7.1,
    ("shared_linear", "torch", "compiled", "small"): 43.1,
    ("shared_linear", "tinygrad", "compiled", "small"): 21.8,
    ("chained_dot", "reference", "eager", "paper"): 2.5,
    ("chained_dot", "torch", "eager", "paper"): 6.0,
    ("rnn_fanout", "jax", "compiled", "small"): 28.5,
    ("unet", "jax", "compiled", "small"): 28.5,
    ("shared_linear", "jax", "compiled", "small"): 28.5,
    ("transformer_block", "tinygrad", "eager", "small"): 9.5,
}

#: Time passes, (set-up s, measured s): torch and tinygrad compiled small as the next
#: run measured them (schedule-compiled.log: "ready" mark, and "go" to "exit": their
#: first step compiles while measured); JAX compiled small as its two records of the run
#: before (cuda-jax-compiled.jsonl: load 1.0-1.1 s, 2.0-2.1 s in all, its memory pass's
#: compile cache loaded); paper eager reference and torch: their records (load_s, and the
#: rest after the gate's wait).
TIME_S = {
    ("unet", "torch", "compiled"): (17.2, 7.7),
    ("tiny_nerf", "tinygrad", "compiled"): (4.3, 1.7),
    ("unet", "tinygrad", "compiled"): (3.7, 6.5),
    ("shared_linear", "tinygrad", "compiled"): (3.5, 13.7),
    ("transformer_block", "tinygrad", "compiled"): (3.6, 2.2),
    ("tiny_nerf", "torch", "compiled"): (10.2, 6.1),
    ("seq2seq_attention", "tinygrad", "compiled"): (1.8, 15.0),
    ("shared_linear", "torch", "compiled"): (12.1, 15.0),
    ("rnn_fanout", "torch", "compiled"): (13.7, 13.2),
    ("rnn_fanout", "tinygrad", "compiled"): (2.5, 18.1),
    ("chained_dot", "tinygrad", "compiled"): (2.3, 3.7),
    ("chained_dot", "torch", "compiled"): (14.0, 3.4),
    ("transformer_block", "torch", "compiled"): (14.2, 4.8),
    ("seq2seq_attention", "torch", "compiled"): (15.3, 26.4),
}
JAX_COMPILED_TIME_S = (1.1, 1.0)
#: Reference gradients: the run's 8 worked 10 s in all, the 6 at small all ended before
#: the first memory pass started (8 s), in the order the memory passes then started in
#: (rnn_fanout, unet, tiny_nerf, seq2seq_attention, transformer_block, chained_dot).
REFERENCE_GRADIENT_S = {
    ("rnn_fanout", "small"): 0.5, ("unet", "small"): 0.8, ("tiny_nerf", "small"): 1.1,
    ("seq2seq_attention", "small"): 1.4, ("transformer_block", "small"): 1.7, ("chained_dot", "small"): 2.0,
    ("shared_linear", "small"): 1.0, ("chained_dot", "paper"): 1.5,
}


def resumed_cells():
    """The 72 cells the earlier budget run left, in the budget's order."""
    todo = cells.expand(list(WORKLOADS), list(FRAMEWORKS), ["small", "paper"], ["float32"], ["cuda"],
                        ["eager", "compiled"])
    left = [c for c in todo if not (c["framework"] == "reference" and c["mode"] == "compiled")
            and not (c["size"] == "small" and c["mode"] == "eager" and
                     (c["workload"], c["framework"]) not in {("transformer_block", "jax"),
                                                              ("transformer_block", "tinygrad")})]
    assert len(left) == 72
    return budget.order(left)


def measured_walls(unmeasured=1.7):
    """A pass's (set-up s, measured s) in the replay: the walls above where the run or its
    neighbours measured them; else the cost table's estimate, memory passes slowed by
    `unmeasured` (JAX compiled's 8 side by side against alone in the run before:
    chained_dot 46.2 / 27.9 s, tiny_nerf 94.7 / 54.5 s)."""
    table = CostTable()

    def walls(task):
        cell, kind = task.job["cell"], task.job["kind"]
        if kind == "reference_gradient":
            return 0.0, REFERENCE_GRADIENT_S.get((cell["workload"], cell["size"]), 1.5)
        key = (cell["workload"], cell["framework"], cell["mode"], cell["size"])
        cost = table.cost(cell)
        if kind == "memory":
            return 0.0, MEMORY_S.get(key, cost.memory_s * unmeasured)
        if cell["size"] == "small" and (cell["workload"], cell["framework"], cell["mode"]) in TIME_S:
            return TIME_S[(cell["workload"], cell["framework"], cell["mode"])]
        if cell["framework"] == "jax" and cell["mode"] == "compiled":
            return JAX_COMPILED_TIME_S
        return cost.setup_s, cost.alone_s

    return walls


#: the cost table the run had (budget.py's RECORDED_CUDA then): JAX compiled small 17 s
RUN_TABLE = {
    ("jax", "compiled", "small"): (17.16, 13.46, 1.54, 2),
    ("jax", "eager", "paper"): (15.69, 13.73, 1.90, 1),
    ("jax", "eager", "small"): (17.88, 17.30, 1.91, 2),
    ("reference", "eager", "paper"): (1.87, 1.13, 0.54, 2),
    ("reference", "eager", "small"): (3.59, 1.90, 0.59, 7),
    ("tinygrad", "compiled", "small"): (3.67, 3.42, 0.97, 2),
    ("tinygrad", "eager", "small"): (6.19, 4.02, 0.91, 2),
    ("torch", "compiled", "small"): (15.89, 8.91, 7.99, 1),
    ("torch", "eager", "paper"): (8.64, 2.54, 0.47, 2),
    ("torch", "eager", "small"): (7.63, 2.24, 0.46, 7),
}


def replay(table=None, endgame=True, monkeypatch=None):
    """Run the 72 cells through the real schedule, budget and cost table (`table`: the
    recorded one, None: today's) on the simulated GPU, 8 slots, with the walls above;
    (the times at which records were written, the budget, the GPU). `endgame=False`:
    the rules of the run (needs `monkeypatch`)."""
    if not endgame:
        monkeypatch.setattr(Budget, "endgame", lambda self, waiting: False)
    clock = Clock()
    gpu = SimulatedGpu(clock, measured_walls(), slots=8)
    costs = CostTable(recorded=table)
    tally = Budget(SWEEP_S, costs, jobs=8, clock=clock)
    gpu.deadline = tally.deadline
    runner = Runner("/nonexistent", Options(), gpus=gpu.gpus(), jobs=8)
    written = []

    def emit(index, record):  # as `harness run` does: the sweep's own walls cost what follows
        written.append(clock.now)
        costs.add(record)

    try:
        schedule.run(resumed_cells(), runner, gpu, emit, "parallel", budget=tally)
    except BudgetSpent:
        pass
    return written, tally, gpu


def by(times, moment):
    return sum(1 for t in times if t <= moment)


#: the 8 time passes the run had set up and waiting at their gate from 86-123 s on
#: (budget-resume.log's "time pass started" lines), all killed at the budget
WAITING_IN_THE_RUN = {
    ("rnn_fanout", "torch", "compiled"), ("tiny_nerf", "tinygrad", "compiled"), ("rnn_fanout", "jax", "compiled"),
    ("unet", "jax", "compiled"), ("unet", "tinygrad", "compiled"), ("transformer_block", "tinygrad", "eager"),
    ("tiny_nerf", "torch", "compiled"), ("unet", "torch", "compiled"),
}


def waiting_cells():
    return [c for c in resumed_cells() if c["size"] == "small" and
            (c["workload"], c["framework"], c["mode"]) in WAITING_IN_THE_RUN]


def test_the_replay_reproduces_the_run_under_its_rules(monkeypatch):
    written, tally, gpu = replay(RUN_TABLE, endgame=False, monkeypatch=monkeypatch)
    # The run: nothing recorded; 25 cells begun (here 31), lost at the budget with the
    # same 8 time passes set up and waiting at their gate.
    assert written == []
    assert 20 <= len(tally.begun) <= 35
    killed = {(t.job["cell"]["workload"], t.job["cell"]["framework"], t.job["cell"]["mode"])
              for t in gpu.killed if t.job["kind"] == "time"}
    assert killed == WAITING_IN_THE_RUN


@pytest.mark.parametrize("table", [RUN_TABLE, None], ids=["the run's table", "today's table"])
def test_the_endgame_records_what_waits_on_the_same_walls(table):
    written, tally, gpu = replay(table)
    print("records by 150/200/250/300/356 s:", [by(written, t) for t in (150, 200, 250, 300, SWEEP_S)],
          "begun", len(tally.begun), "stopped", len(tally.stopped), "killed", len(gpu.killed))
    # N, derived: the 8 cells whose time passes waited in the run measure for 40 s in
    # all here (1.0-13.2 s each); the endgame reserves for them twice the table's
    # estimate, at least 3 s each, plus overheads: 81 s with the run's table (its torch
    # compiled 0.9 s is far short, its JAX compiled 11.9 s far long), 133 s with
    # today's. Every other waiting cell adds its own reserve beside its own need, so
    # once the endgame has stopped the memory passes, those 8 measure before the
    # budget, whatever the memory passes cost: N = 8.
    walls = measured_walls()
    need = sum(walls(SimpleNamespace(job={"kind": "time", "cell": c}))[1] for c in waiting_cells())
    reserve = Budget(SWEEP_S, CostTable(recorded=table)).reserve_s(waiting_cells())
    assert need == pytest.approx(40.3, abs=0.1) and reserve >= need
    assert by(written, SWEEP_S) >= len(WAITING_IN_THE_RUN)
    # and nothing is lost at the budget: every cell begun was recorded or stopped in
    # the endgame (left for --resume, as the closing line says)
    assert not gpu.killed
    assert len(written) + len(tally.stopped) == len(tally.begun)
