"""When the anchor's node goes away: is the node usable, and does the anchor move or stay?"""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.capacity import nodes
from controller.core.model.pods import RunPod
from controller.core.placement import anchor
from controller.core.placement.anchor import Mobility, Situation, Verb


def node(**spec: Any) -> dict[str, Any]:
    ready = spec.pop("ready", "True")
    return {"metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
            "spec": spec, "status": {"conditions": [{"type": "Ready", "status": ready}]}}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "ci", "operator": "Exists"}, {"key": "ci", "effect": "NoSchedule"}, True),
        ({"key": "ci", "value": "a"}, {"key": "ci", "value": "b", "effect": "NoSchedule"}, False),
        ({"key": "ci", "value": "a"}, {"key": "ci", "value": "a", "effect": "NoSchedule"}, True),
        ({"operator": "Exists"}, {"key": "anything", "effect": "NoExecute"}, True),
        ({"key": "ci", "operator": "Exists", "effect": "NoExecute"}, {"key": "ci", "effect": "NoSchedule"}, False),
        ({"key": "other", "operator": "Exists"}, {"key": "ci", "effect": "NoSchedule"}, False),
    ],
)
def test_toleration_matching_follows_the_api(toleration: dict[str, Any], taint: dict[str, Any],
                                             expected: bool) -> None:
    assert nodes.tolerates(toleration, taint) is expected


def test_why_a_node_cannot_keep_an_anchor() -> None:
    assert nodes.unavailable(node(), []) is None
    assert nodes.unavailable(None, []) == "deleted"
    assert nodes.unavailable(node(unschedulable=True, taints=[
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]), []) == "cordoned"
    assert nodes.unavailable(node(ready="Unknown"), []) == "NotReady"
    assert nodes.unavailable(node(ready="Unknown", taints=[
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]), []) == "NotReady"
    tainted = node(taints=[{"key": "maintenance", "value": "now", "effect": "NoExecute"}])
    assert nodes.unavailable(tainted, []) == "tainted maintenance=now:NoExecute"
    assert nodes.unavailable(tainted, [{"key": "maintenance", "operator": "Exists"}]) is None
    prefer = node(taints=[{"key": "soft", "effect": "PreferNoSchedule"}])
    assert nodes.unavailable(prefer, []) is None


def pv(**spec: Any) -> dict[str, Any]:
    return {"spec": spec}


def bound(volume: str = "pv-1") -> dict[str, Any]:
    return {"spec": {"volumeName": volume}}


def on_node(name: str) -> dict[str, Any]:
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [name]}]}]}}


def test_which_claims_can_follow_the_anchor() -> None:
    assert anchor.claim_mobility(None, None, "n1") is Mobility.UNBOUND
    assert anchor.claim_mobility({"spec": {}}, None, "n1") is Mobility.UNBOUND
    assert anchor.claim_mobility(bound(), pv(nodeAffinity=on_node("n1")), "n1") is Mobility.NODE_LOCAL
    assert anchor.claim_mobility(bound(), pv(local={"path": "/d"}, nodeAffinity=on_node("n1")), "n1") is Mobility.NODE_LOCAL
    assert anchor.claim_mobility(bound(), pv(nodeAffinity=on_node("n2")), "n1") is Mobility.FOLLOWS
    zonal = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}}
    assert anchor.claim_mobility(bound(), pv(nodeAffinity=zonal), "n1") is Mobility.FOLLOWS
    assert anchor.claim_mobility(bound(), pv(csi={"driver": "ebs"}), "n1") is Mobility.FOLLOWS


def situation(reason: str = "cordoned", pods: list[RunPod] | None = None,
              claims: dict[str, Mobility] | None = None) -> Situation:
    return Situation("build-42", "n1", reason, pods or [], claims or {})


def test_the_anchor_moves_when_nothing_holds_it() -> None:
    decision = anchor.decide(situation(claims={"ws": Mobility.UNBOUND, "cache": Mobility.FOLLOWS},
                                       pods=[RunPod("done", "n1", "Succeeded"),
                                             RunPod("elsewhere", "n2", "Running"),
                                             RunPod("waiting", "", "Pending")]))
    assert decision.verb is Verb.MOVE and not decision.force and decision.notice is None


@pytest.mark.parametrize("reason", ["NotReady", "deleted"])
def test_a_balloon_on_a_lost_node_is_removed_without_grace(reason: str) -> None:
    assert anchor.decide(situation(reason)).force


def test_a_running_task_keeps_the_anchor_and_the_run_is_told_what_frees_it() -> None:
    decision = anchor.decide(situation(pods=[RunPod("build-a", "n1", "Running")]))
    assert decision.verb is Verb.STAY and decision.notice is not None
    assert decision.notice.reason == "AnchorNodeUnavailable" and decision.notice.warning
    assert "build-a" in decision.notice.message and "those pods end" in decision.notice.message
    assert "cordoned" in decision.notice.message


def test_a_node_local_claim_keeps_the_anchor() -> None:
    decision = anchor.decide(situation("tainted x:NoExecute", claims={"ws": Mobility.NODE_LOCAL}))
    assert decision.verb is Verb.STAY and decision.notice is not None
    assert "ws" in decision.notice.message and "taint is removed" in decision.notice.message


def test_a_pod_bound_but_not_yet_running_holds_the_node_too() -> None:
    """Bound pods start where they are bound: moving the anchor would split them off."""
    assert anchor.decide(situation(pods=[RunPod("just-bound", "n1", "Pending")])).verb is Verb.STAY
