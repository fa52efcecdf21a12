"""Pure: what a PipelineRun will need at once on its node, its peak concurrent requests.

Tasks that the DAG does not order (by `runAfter` or by a result reference) may run at the same
time: whatever their durations, Tekton starts a task as soon as the tasks it depends on are
done. So the peak is, per resource, the heaviest antichain of the DAG (a set of tasks of which
none comes after another), weighing each task by its pod's requests times its matrix fan-out;
the `finally` tasks, which all start together once the rest is done, are a set of their own.
The heaviest antichain is found exactly by the weighted form of Dilworth's theorem: total weight
minus a maximum flow through the DAG's order (`_heaviest_antichain`).
"""

from __future__ import annotations

import functools
import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from controller.core.basics import quantity
from controller.core.basics.quantity import Amounts
from controller.core.model import podrequests

_RESULT_REF = re.compile(r"tasks\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.results\.")
_TEKTON_KINDS = {None, "", "Task", "ClusterTask"}


@dataclass(frozen=True)
class Node:
    name: str
    requests: Amounts  # of one pod
    pods: int = 1  # matrix fan-out
    after: frozenset[str] = frozenset()

    @property
    def weight(self) -> Amounts:
        return quantity.scale(self.requests, self.pods)


@dataclass(frozen=True)
class Estimate:
    main: tuple[Node, ...]
    final: tuple[Node, ...] = ()
    # Tasks whose spec we could not read (resolvers, a Task we may not read): the policy's
    # estimate stood for them.
    unknown: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    # Each unknown task's reference and taskRunSpecs, as text: unknown tasks that share one
    # make pods that ask for the same.
    refs: tuple[tuple[str, str], ...] = ()

    @functools.cached_property
    def _peak(self) -> Amounts:
        # Every event of a run asks for its peak, and the antichain search was most of what
        # our own code spent on one (cProfile of 40 runs' events); the nodes never change.
        return peak(self.main, self.final)

    @property
    def peak(self) -> Amounts:
        return dict(self._peak)

    @property
    def tasks(self) -> dict[str, Amounts]:
        """Each pipeline task's weight, fan-out included."""
        return {n.name: n.weight for n in [*self.main, *self.final]}

    def learned(self, seen: Mapping[str, Amounts]) -> Estimate:
        """The estimate with each unknown task counted as one of its pods asks (`seen`, by
        pipeline task), or as a pod of an unknown task with the same reference asks. Tekton
        builds a TaskRun's pod from the spec it resolved (`status.taskSpec`), so the pod tells
        what the spec would, after LimitRanges and defaults. Itself when nothing is new."""
        refs = dict(self.refs)
        by_ref = {refs[t]: a for t, a in seen.items() if t in refs and a}
        found = {t: seen.get(t) or by_ref.get(refs.get(t, "")) for t in self.unknown}
        learnt = {t: a for t, a in found.items() if a}
        if not learnt:
            return self

        def counted(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
            return tuple(replace(n, requests=learnt[n.name]) if n.name in learnt else n
                         for n in nodes)

        return replace(
            self,
            main=counted(self.main),
            final=counted(self.final),
            unknown=tuple(t for t in self.unknown if t not in learnt),
            refs=tuple((t, ref) for t, ref in self.refs if t not in learnt),
        )

    def remaining(self, done: frozenset[str] | set[str]) -> Amounts:
        """The peak of what is left once the `done` tasks are over."""
        if not done:
            return self.peak
        return peak(
            [n for n in self.main if n.name not in done],
            [n for n in self.final if n.name not in done],
        )


def dependencies(task: Mapping[str, Any]) -> frozenset[str]:
    """`runAfter` and the tasks whose results the task's params, matrix or when refer to
    (`PipelineTask.Deps` in Tekton)."""
    refs = json.dumps([task.get("params"), task.get("matrix"), task.get("when")])
    named = {m.group(1) for m in _RESULT_REF.finditer(refs)}
    after = {str(a) for a in task.get("runAfter") or [] if isinstance(a, str)}
    return frozenset(named | after)


def fan_out(task: Mapping[str, Any]) -> tuple[int, bool]:
    """The number of TaskRuns a matrix makes (`Matrix.CountCombinations`), and whether it is
    known before the run: an array that comes from a result is known only at run time, and
    counts as one here."""
    matrix = task.get("matrix")
    if not isinstance(matrix, Mapping):
        return 1, True
    params = [p for p in matrix.get("params") or [] if isinstance(p, Mapping)]
    include = [i for i in matrix.get("include") or [] if isinstance(i, Mapping)]
    count, known = (1 if params else 0), True
    arrays: dict[str, list[Any]] = {}
    for p in params:
        value = p.get("value")
        if isinstance(value, list):
            arrays[str(p.get("name"))] = value
            count *= max(len(value), 1)
        else:
            known = False
    if not params:
        count = len(include)
    else:
        # Params make every combination of their arrays; an include entry adds one TaskRun
        # when it names a value outside them, and otherwise joins the ones it matches.
        for entry in include:
            named = [p for p in entry.get("params") or []
                     if isinstance(p, Mapping) and str(p.get("name")) in arrays]
            if any(p.get("value") not in arrays[str(p.get("name"))] for p in named):
                count += 1
    return max(count, 1), known


Reader = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]


def task_spec_of(task: Mapping[str, Any], read: Reader) -> tuple[Mapping[str, Any] | None, bool]:
    """The spec of a pipeline task's Task and whether it makes a pod: inline, or through `read`
    from its `taskRef` (a namespaced Task by name, or what a resolver fetched; None when it
    cannot be read). Custom tasks make no pod."""
    inline = task.get("taskSpec")
    if isinstance(inline, Mapping):
        if inline.get("apiVersion") and inline.get("kind") not in _TEKTON_KINDS:
            return None, False
        return inline, True
    ref = task.get("taskRef")
    if not isinstance(ref, Mapping):
        return None, not task.get("pipelineRef") and not task.get("pipelineSpec")
    if ref.get("apiVersion") and not str(ref.get("apiVersion")).startswith("tekton.dev/"):
        return None, False
    if ref.get("kind") not in _TEKTON_KINDS or not (ref.get("resolver") or ref.get("name")):
        return None, True
    return read(ref), True


def estimate(
    pipeline_spec: Mapping[str, Any],
    read_task: Reader,
    task_run_specs: Mapping[str, Mapping[str, Any]],
    namespace: podrequests.Namespace | None = None,
    unknown_task: Amounts | None = None,
) -> Estimate:
    """The run's peak from its resolved pipeline, reading each `taskRef` with `read_task`.
    `task_run_specs` are the run's `taskRunSpecs` by pipeline task name; `unknown_task` stands
    for a task whose spec cannot be read. Raises ValueError for a quantity that does not
    parse."""
    unknown: list[str] = []
    notes: list[str] = []
    refs: list[tuple[str, str]] = []

    def nodes(tasks: Iterable[Any]) -> list[Node]:
        out = []
        for task in tasks:
            if not isinstance(task, Mapping) or not task.get("name"):
                continue
            name = str(task["name"])
            spec, makes_pod = task_spec_of(task, read_task)
            if not makes_pod:
                requests: Amounts = {}
            elif spec is None:
                unknown.append(name)
                refs.append((name, json.dumps([task.get("taskRef"), task_run_specs.get(name)],
                                              sort_keys=True, default=str)))
                requests = {**(unknown_task or {}), quantity.PODS: 1000}
            else:
                requests = podrequests.pod_requests(
                    spec, task_run_specs.get(name), namespace or podrequests.Namespace()
                )
            pods, known = fan_out(task)
            if not known:
                notes.append(f"the matrix of {name} is sized by a result: counted as {pods}")
            out.append(Node(name, requests, pods, dependencies(task)))
        return out

    main = nodes(pipeline_spec.get("tasks") or [])
    final = nodes(pipeline_spec.get("finally") or [])
    return Estimate(tuple(main), tuple(final), tuple(unknown), tuple(notes), tuple(refs))


def peak(tasks: Sequence[Node], final: Sequence[Node] = ()) -> Amounts:
    """Per resource, the most the run can ask at once."""
    resources = {r for n in [*tasks, *final] for r in n.requests}
    order = _closure(tasks)
    out: Amounts = {}
    for r in sorted(resources):
        weights = {n.name: n.weight.get(r, 0) for n in tasks}
        main = _heaviest_antichain(weights, order)
        out[r] = max(main, sum(n.weight.get(r, 0) for n in final))
    return {r: a for r, a in out.items() if a > 0}


def _closure(tasks: Sequence[Node]) -> dict[str, set[str]]:
    """For each task, every task that must finish before it starts."""
    known = {n.name for n in tasks}
    direct = {n.name: {d for d in n.after if d in known and d != n.name} for n in tasks}
    before: dict[str, set[str]] = {}

    def walk(name: str, path: frozenset[str]) -> set[str]:
        if name in before:
            return before[name]
        found: set[str] = set()
        for dep in direct[name]:
            if dep in path:  # a cycle, which Tekton refuses; do not loop on it
                continue
            found |= {dep, *walk(dep, path | {dep})}
        before[name] = found
        return found

    for n in tasks:
        walk(n.name, frozenset({n.name}))
    return before


def _heaviest_antichain(weights: Mapping[str, int], before: Mapping[str, set[str]]) -> int:
    """Weighted Dilworth: the heaviest antichain weighs as much as the fewest chains that cover
    every task as many times as its weight, which is the total weight less a maximum flow from
    each task's left copy to the right copy of every task after it (Edmonds-Karp)."""
    names = [n for n, w in weights.items() if w > 0]
    if not names:
        return 0
    source, sink = ("s", ""), ("t", "")
    cap: dict[tuple[str, str], dict[tuple[str, str], int]] = {source: {}, sink: {}}
    infinite = sum(weights.values()) + 1

    def edge(a: tuple[str, str], b: tuple[str, str], c: int) -> None:
        cap.setdefault(a, {})[b] = cap.setdefault(a, {}).get(b, 0) + c
        cap.setdefault(b, {}).setdefault(a, 0)

    for n in names:
        edge(source, ("l", n), weights[n])
        edge(("r", n), sink, weights[n])
        for m in names:
            if n in before.get(m, ()):
                edge(("l", n), ("r", m), infinite)
    flow = 0
    while True:
        parent: dict[tuple[str, str], tuple[str, str]] = {source: source}
        queue = deque([source])
        while queue and sink not in parent:
            here = queue.popleft()
            for there, c in cap[here].items():
                if c > 0 and there not in parent:
                    parent[there] = here
                    queue.append(there)
        if sink not in parent:
            return sum(weights[n] for n in names) - flow
        push, v = infinite, sink
        while v != source:
            push, v = min(push, cap[parent[v]][v]), parent[v]
        v = sink
        while v != source:
            cap[parent[v]][v] -= push
            cap[v][parent[v]] += push
            v = parent[v]
        flow += push
