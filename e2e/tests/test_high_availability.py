"""Two replicas: both answer admission requests, exactly one reconciles, failover works."""

from __future__ import annotations

import json
import ssl
import urllib.request

import pytest

from controller.faces import webhook
from e2e.harness.cluster import ClusterHandle
from e2e.harness.coscheduler import Coscheduler
from e2e.harness.scenario import Scenario
from tests import factories

pytestmark = pytest.mark.e2e



def admission_answer(replica: Coscheduler, namespace: str) -> dict[str, object]:
    ctx = ssl.create_default_context()
    replica.ca.configure_trust(ctx)
    body = json.dumps(
        factories.admission_review(factories.taskrun_pod(namespace=namespace))
    ).encode()
    req = urllib.request.Request(
        f"https://127.0.0.1:{replica.webhook_port}{webhook.PATH}",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    answer: dict[str, object] = json.loads(
        urllib.request.urlopen(req, context=ctx, timeout=5).read()
    )
    return answer


LEADER = "tekton_coscheduler_leader"


def leading(replica: Coscheduler) -> bool:
    """From the Lease itself: a "leading" log line may have scrolled out of the tail read."""
    return replica.leads()


def test_one_leader_both_serve_and_failover(
    cluster: ClusterHandle, enabled: Scenario, coscheduler: Coscheduler
) -> None:
    s = enabled
    cluster.wait_for(lambda: leading(coscheduler), timeout=30, what="the first replica leads")
    standby = Coscheduler(
        cluster,
        env_overrides=coscheduler.env_overrides,
        name="standby",
        kubeconfig=coscheduler.kubeconfig,
    )
    standby.start()
    try:
        # Both replicas answer the webhook the same way, leader or not.
        for replica in (coscheduler, standby):
            assert "patch" in admission_answer(replica, s.ns)["response"]  # type: ignore[operator]
        cluster.wait_for(lambda: standby.said("waiting for leadership"), timeout=30,
                         what="the standby a candidate")
        assert not leading(standby)
        # The gauges say what the Lease says: the leader's server and reconciler both 1, the
        # standby's 0; both ready; each process with its build and its process figures.
        cluster.wait_for(lambda: coscheduler.metric(LEADER) == 2, timeout=15,
                         what="the leader's gauges to say it leads")
        assert standby.metric(LEADER) == 0
        for replica in (coscheduler, standby):

            def ready(r: Coscheduler = replica) -> bool:
                return r.metric("tekton_coscheduler_ready") == 1

            cluster.wait_for(ready, timeout=30, what=f"{replica.name} ready, as its gauge says")
            for process in ("server", "reconciler"):
                assert replica.metric("tekton_coscheduler_build_info", process=process) == 1
                assert replica.metric("process_resident_memory_bytes", process=process) > 0
        first = s.run(name="before", workspaces=[{"name": "w", "emptyDir": {}}])
        s.balloon_node(first)

        coscheduler.kill()  # the leader dies without handing over
        cluster.wait_for(lambda: leading(standby), timeout=30, what="the standby to take over")
        cluster.wait_for(lambda: standby.metric(LEADER) == 2, timeout=15,
                         what="the standby's leader gauges to say it leads")
        second = s.run(name="after", workspaces=[{"name": "w", "emptyDir": {}}])
        s.balloon_node(second)
        assert len(s.balloons(first)) == 1 and len(s.balloons(second)) == 1
    finally:
        if coscheduler.process is None:
            coscheduler.start()
        standby.stop()  # hands the Lease back: the session's replica leads again at once
    cluster.wait_for(
        lambda: leading(coscheduler), timeout=30, what="the session replica leads again"
    )
