"""Real PipelineRuns in a namespace, as the suites check them: where their pods went, whether
they were tied to the run's balloon, what the operator said and counted."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from controller.core.admission import affinity
from controller.core.basics import names
from e2e.harness import tekton_runs as tr
from e2e.harness.cluster import ClusterHandle, name_of, present
from e2e.harness.scenario import Scenario
from e2e.harness.tekton_runs import PodRecorder, PodSeen


class Runs(Scenario):
    """A namespace's scenario with real runs: what was created, where its pods went."""

    def __init__(self, cluster: ClusterHandle, namespace: str, recorder: PodRecorder) -> None:
        super().__init__(cluster, namespace)
        self.recorder = recorder

    def start(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return tr.create_run(self.custom, self.ns, body)

    def done(self, run: Mapping[str, Any], timeout: float = 180) -> dict[str, Any]:
        return tr.wait_finished(
            self.cluster, self.custom, self.ns, run["metadata"]["name"], timeout
        )

    def cancel(self, run: Mapping[str, Any]) -> dict[str, Any]:
        """Cancels the run and waits for Tekton to end it."""
        self.custom.patch_namespaced_custom_object(
            *tr.TEKTON, self.ns, "pipelineruns", run["metadata"]["name"],
            {"spec": {"status": "Cancelled"}},
        )
        return self.done(run, timeout=60)

    def release(self, runs: Sequence[Mapping[str, Any]], task: str = tr.FETCH,
                timeout: float = 60) -> None:
        """Lets the held pod of this task of each run end (tr.HOLD off it, once Tekton has made
        it): from then on it ends after its run-seconds, as any other. Each must still be
        running: held, not ended early."""
        for run in runs:
            uid, name = run["metadata"]["uid"], run["metadata"]["name"]
            pod = self.cluster.wait_for(partial(self.pod_of, uid, task), timeout=timeout,
                                        what=f"the {task} pod of {name}")
            held = self.core.read_namespaced_pod(pod.name, self.ns)
            assert tr.HOLD in (present(held.metadata).annotations or {}), pod.name
            assert present(held.status).phase in ("Pending", "Running"), (pod.name, held.status)
            self.core.patch_namespaced_pod(pod.name, self.ns,
                                           {"metadata": {"annotations": {tr.HOLD: None}}})

    def pod_of(self, uid: str, task: str) -> PodSeen | None:
        """The run's pod of this task, once seen (its first, if it was retried)."""
        return next((p for p in self.recorder.pods(uid) if p.task == task), None)

    def said(self, run: Mapping[str, Any], reason: str, timeout: float = 60) -> Any:
        """The first Event of this reason on the run, once there is one."""
        uid = run["metadata"]["uid"]
        return self.cluster.wait_for(
            lambda: next((e for e in self.events(reason) if e.involved_object.uid == uid), None),
            timeout=timeout,
            what=f"{reason} on {run['metadata']['name']}",
        )

    def warnings(self) -> dict[str, list[str]]:
        """Run name -> the Warnings said on it (reason: message), by anyone."""
        out: dict[str, list[str]] = {}
        for event in self.core.list_namespaced_event(self.ns).items:
            if event.type == "Warning" and event.involved_object.kind == "PipelineRun":
                out.setdefault(present(event.involved_object.name), []).append(
                    f"{event.reason}: {event.message}")
        return out

    def anchor(self, run: Mapping[str, Any], timeout: float = 60) -> str:
        """The node of the run's first bound balloon pod, as our Anchored Event names it too."""
        uid, name = run["metadata"]["uid"], run["metadata"]["name"]
        node = self.cluster.wait_for(
            lambda: self.recorder.first_balloon_node(uid),
            timeout=timeout,
            what=f"balloon of {name} bound",
        )
        self.cluster.wait_for(
            lambda: node in tr.anchored_nodes(self.core, self.ns, uid),
            timeout=30,
            what=f"Anchored Event of {name} naming {node}",
        )
        return node

    def local_pvs_everywhere(self, per_node: int = 2) -> None:
        """Free local volumes on every schedulable node: wherever the balloon goes, a claim Tekton
        makes after the balloon was placed can still be bound beside it."""
        for node in tr.schedulable_nodes(self.core):
            for _ in range(per_node):
                self.cluster.add_local_pv(f"pv-{node}-{uuid.uuid4().hex[:6]}", node)

    def wait_bound(self, claim: str, timeout: float = 30) -> str:
        return self.cluster.wait_for(
            lambda: present(
                self.core.read_namespaced_persistent_volume_claim(claim, self.ns).spec
            ).volume_name,
            timeout=timeout,
            what=f"claim {claim} bound",
        )

    def pv_node(self, claim: str) -> str:
        pv = self.core.read_persistent_volume(self.wait_bound(claim))
        required = present(present(present(pv.spec).node_affinity).required)
        expression = present(required.node_selector_terms[0].match_expressions)[0]
        return str(present(expression.values)[0])

    def claims_of(self, run: Mapping[str, Any]) -> list[str]:
        """Names of the PVCs Tekton made for the run (owned by it)."""
        uid = run["metadata"]["uid"]
        return [
            name_of(p)
            for p in self.core.list_namespaced_persistent_volume_claim(self.ns).items
            if any(o.uid == uid for o in present(p.metadata).owner_references or [])
        ]


def our_terms(pod: PodSeen) -> list[dict[str, Any]]:
    return affinity.balloon_terms(pod.spec)


def assert_co_located(
    s: Runs, run: Mapping[str, Any], anchor: str, tasks: Sequence[str]
) -> list[PodSeen]:
    """Exactly these task pods (one per attempt), each bound to the anchor and tied to the run's
    balloon by our one term: co-located by the webhook, not by chance."""
    uid = run["metadata"]["uid"]
    pods = s.recorder.pods(uid)
    assert sorted(p.task for p in pods) == sorted(tasks), [p.name for p in pods]
    assert {p.name: p.node for p in pods} == {p.name: anchor for p in pods}
    for pod in pods:
        terms = our_terms(pod)
        assert len(terms) == 1, pod.spec.get("affinity")
        assert terms[0]["labelSelector"]["matchLabels"][names.LABEL_RUN_UID] == uid
    # A placed balloon never moves, and none comes back elsewhere once the run is over.
    assert {b.node for b in s.recorder.balloons(uid) if b.node} == {anchor}
    return pods


def assert_untouched(s: Runs, run: Mapping[str, Any], tasks: Sequence[str]) -> None:
    uid = run["metadata"]["uid"]
    pods = s.recorder.pods(uid)
    assert sorted(p.task for p in pods) == sorted(tasks)
    assert all(p.node for p in pods)
    assert [p.spec.get("affinity") for p in pods] == [None] * len(pods)
    assert s.balloons() == [] and s.recorder.balloons(uid) == []
    assert tr.anchored_nodes(s.core, s.ns, uid) == []
