"""The flagged release pairs measured again, their two releases interleaved: A B A B ...

One `harness releases --confirm` run. For each flagged (workload, mode, before, after)
of a store's changes (confirm.py judges them), the cell of `before` and the cell of
`after` alternate, pair after pair, each sample the sweep's own memory pass in a fresh
worker (its reference gradient first, as the sweep; no time pass: the confirmation
judges memory figures only; harness/sweep/memory_passes.py). Interleaving is the
point: a load that drifts during the run moves both releases alike, where the sweep
measured one release's rounds, then the next's. Every sample is appended at once to
FRAMEWORK.confirm.jsonl (compacted like the store's records, tagged with its pair), so
an interrupted run resumes where it stopped and a run with more --pairs adds pairs to
the ones held.
One run at a time measures a store (`one_run`): a second would measure the same pairs
again beside the first, each one's samples replacing the other's.
Samples known to be wrong (measured in an environment since found broken) are withdrawn,
not deleted (`withdraw`, `--confirm --measure-again REASON`): moved to
FRAMEWORK.confirm.withdrawn.jsonl with the reason, and their pairs measured anew.
"""

import contextlib
import fcntl
import json
import os
import time

from harness import interrupts, results
from harness.choices import ChoiceError
from harness.releases import confirm, detect, store
from harness.sweep import cells, resume
from harness.sweep.cell_runner import Options
from harness.sweep.memory_passes import MemoryPasses
from harness.versions import envs, index


def wanted(document, scope="all", workloads_=None, modes=None, first=None, last=None):
    """{group key: [its flagged memory changes]} to confirm, in release order. scope
    "large": only the release pairs where some flagged move passes the size rule
    (confirm.large); every flagged figure of a pair measured is judged (one sample
    serves them all), and any of them left undecided gets the further pairs."""
    lo = index.parse(first) if first else None
    hi = index.parse(last) if last else None
    found = {}
    for change in document["changes"]:
        if change["advisory"] or (change.get("confirmation") or {}).get("across"):
            continue  # time is never confirmed; a change judged across a wider pair already has its verdict
        if workloads_ and change["workload"] not in workloads_ or modes and change["mode"] not in modes:
            continue
        if lo is not None and index.parse(change["before_release"]) < lo:
            continue
        if hi is not None and index.parse(change["release"]) > hi:
            continue
        found.setdefault(confirm.group_key(change), []).append(change)
    if scope == "large":
        found = {key: changes for key, changes in found.items() if any(confirm.large(c) for c in changes)}
    return dict(sorted(found.items(), key=lambda item: (index.sort_key(item[0][2]), index.sort_key(item[0][3]),
                                                        item[0][0], item[0][1])))


@contextlib.contextmanager
def one_run(path, what="harness releases --confirm"):
    """Hold `path`.run.lock for a run (`what`: a confirmation, a leak-only pass) that
    appends to `path`; a second run of it is refused, naming the one running (the lock
    is the kernel's: it goes with the process, however that ends)."""
    with open(f"{path}.run.lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "a process"
            raise ChoiceError(f"{path}: another `{what}` run is measuring this store ({holder}); "
                              f"two would measure the same cells twice: wait for it, or stop it (its samples are "
                              f"kept) and run again") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}, since {time.strftime('%Y-%m-%dT%H:%M:%S')}\n")
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def withdraw(out, framework, keys, reason):
    """Move every held sample of the group keys `keys` (wanted()'s) from
    FRAMEWORK.confirm.jsonl to FRAMEWORK.confirm.withdrawn.jsonl, each tagged with
    `reason` and the time; returns how many. Every other line stays byte for byte (a
    damaged one too). The withdrawn samples are appended first and the store rewritten
    whole after (results.py's atomic protocol): a process killed between the two leaves a
    sample in both files, never in neither. The caller holds the store's `one_run`."""
    path = store.confirm_path(out, framework)
    labels = {(confirm.pair_label(before, after), workload, mode) for workload, mode, before, after in keys}
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.readlines()
    except FileNotFoundError:
        return 0
    kept, taken = [], []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict) and (record.get(confirm.PAIR_KEY), record.get("workload"),
                                         record.get("mode")) in labels:
            taken.append(record)
        else:
            kept.append(line)
    if not taken:
        return 0
    stamp = {"reason": reason, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    with interrupts.deferred():  # both files whole: a stop waits for the move to end
        for record in taken:
            results.append_record(store.withdrawn_path(out, framework), dict(record, **{store.WITHDRAWN_KEY: stamp}))
        results.write_lines(path, kept)
    return len(taken)


class SideBySide:
    def __init__(self, out, framework, size, dtype, timeout_s=600.0, keep_envs=False, measure=None, say=print,
                 torch_index=None):
        self.out, self.framework, self.size, self.dtype = out, framework, size, dtype
        self.timeout_s, self.keep_envs, self.say = timeout_s, keep_envs, say
        # torch's releases are built only from an index named (`--torch-index`): without
        # it a release whose environment the sweep pruned would be `unavailable` here
        self.torch_index = torch_index
        self.measure = measure  # measure(cells) -> (cell, record) pairs; None: MemoryPasses
        # (with the prediction, with the leak-only pass's leak budgets) -> MemoryPasses (one
        # each: a reference gradient per workload)
        self.passes = {}
        self.path = store.confirm_path(out, framework)
        self.held = resume.records_in(self.path)

    def cell(self, workload, mode, release):
        [found] = cells.expand([workload], [(self.framework, release)], [self.size], [self.dtype], ["cpu"], [mode])
        return found

    def run(self, groups, pairs=confirm.PAIRS, max_pairs=confirm.MAX_PAIRS, withdraw_reason=None):
        """Measure `groups` (wanted()); returns how many samples were measured. With
        `withdraw_reason`, the samples held for them are withdrawn first (`withdraw`)."""
        last_use = {}
        for number, key in enumerate(groups):
            for release in key[2:]:
                last_use[release] = number
        with one_run(self.path):
            if withdraw_reason is not None:
                taken = withdraw(self.out, self.framework, groups, withdraw_reason)
                self.say(f"{self.framework}: {taken} sample(s) of {len(groups)} release pair(s) withdrawn to "
                         f"{store.withdrawn_path(self.out, self.framework)} ({withdraw_reason}); measured anew",
                         flush=True)
            self.held = resume.records_in(self.path)  # what a run that ended since this one was set up added
            return self._run(groups, pairs, max_pairs, last_use)

    def _run(self, groups, pairs, max_pairs, last_use):
        measured = 0
        try:
            for number, (key, changes) in enumerate(groups.items(), 1):
                measured += self._confirm_group(key, changes, pairs, max_pairs, f"[{number}/{len(groups)}]")
                self._prune([r for r, n in last_use.items() if n == number - 1])
        finally:
            for passes in self.passes.values():
                passes.close()
        return measured

    def _confirm_group(self, key, changes, pairs, max_pairs, where):
        workload, mode, before, after = key
        target, measured = pairs, 0
        while True:
            measured += self._measure_pairs(key, target, changes)
            verdicts = [(c, confirm.verdict_of(c, self.held)) for c in changes]
            if target < max_pairs and any(confirm.undecided(v) for _, v in verdicts):
                target = max_pairs
                continue
            break
        for change, verdict in verdicts:
            self.say(f"{where} {confirm.line(dict(change, confirmation=verdict))}: {verdict['status']}", flush=True)
        return measured

    def _measure_pairs(self, key, target, changes):
        """The samples pairs 1..target lack, A then B within each pair."""
        workload, mode, before, after = key
        held = confirm.samples(self.held, key)
        # a sample the release could not be installed for is measured again by a later run;
        # so is one measured before the leak phase existed where the growth per step is
        # flagged (its newer sample then stands for every figure of the pair)
        figures_ = {c["figure"] for c in changes}
        have = {release: {i for i, r in held[release] if r.get("status") != "unavailable"
                          and not any(confirm.predates(r, f) for f in figures_)}
                for release in (before, after)}
        # a pair is measured whole: one side measured alone (its partner unavailable then,
        # or a run stopped between them) is measured again beside the other, and the newer
        # sample of an index stands (confirm.samples)
        todo = [(i, release) for i in range(1, target + 1) if not (i in have[before] and i in have[after])
                for release in (before, after)]
        if not todo:
            return 0
        predicted = any(c["figure"] == "predicted" for c in changes)  # the prediction costs a compile a cell
        # a flagged growth per step: the leak phase as long as the leak-only pass ran it
        growth = any(c["figure"] == detect.GROWTH for c in changes)
        kind = (predicted, growth)
        if self.measure is None and kind not in self.passes:
            options = Options(warmup=1, repeat=3, time_budget_s=1.0, timeout_s=self.timeout_s, prediction=predicted,
                              torch_index=self.torch_index, leak_budgets_s=detect.GROWTH_BUDGETS_S if growth else None)
            # the sweep's memory pass after its workload's reference gradient: the gradient
            # check runs inside it, and what it leaves is part of the retained figure flagged
            self.passes[kind] = MemoryPasses(options, reference=True)
        measure = self.measure or self.passes[kind].run
        plan = [self.cell(workload, mode, release) for _, release in todo]
        count = 0
        for (i, release), (_, record) in zip(todo, measure(plan)):
            tagged = dict(store.compact(record), **{confirm.PAIR_KEY: confirm.pair_label(before, after),
                                                    confirm.INDEX_KEY: i})
            with interrupts.deferred():  # a sample is written whole
                results.append_record(self.path, tagged)
            self.held.append(tagged)
            count += 1
            if record.get("status") == "unavailable":  # every further sample of it would be too
                self.say(f"  {self.framework}=={release} unavailable: {record.get('message', '')[-300:]}", flush=True)
                break
        return count

    def _prune(self, releases):
        """Remove the environments this run built for `releases` (their last pair is done)."""
        if self.keep_envs:
            return
        for release in releases:
            paths = {(r.get("provenance") or {}).get("framework_env") for r in self.held
                     if detect.release_of(r) == release}
            for path in paths - {None}:
                if envs.built_here(path) and os.path.isdir(path):
                    if not envs.remove(path):
                        self.say(f"  {path}: kept, another process is using it", flush=True)
