"""Benchmark-sized parity: thousands of generated pods through policy mode and webhook mode.

python -m bench.admission_parity [--pods 3000]

The e2e suite compares the two modes on the decision table and a few dozen generated pods;
this runs the fuzzer's pod generator (tests/fuzz/reviews.py) for thousands more, on a local
control plane with the chart's policy and a webhook replica, creating each pod (dry run) in a
namespace of each mode and comparing the answers. Pods the API server refuses must be refused in
both; those it takes must come back identical.
Last line: `admission parity: N pods, D differ (refused in both: R)`.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings

from controller.core.basics import names
from e2e.harness.cluster import LocalCluster
from e2e.harness.cluster import tekton as tekton_cluster
from e2e.harness.coscheduler import install_crds
from e2e.harness.parity import Pair, install_policy, webhook_replica
from tests.fuzz import reviews

WEBHOOK_LABEL = "bench.tekton-coscheduler.dev/parity-webhook"


def generated(count: int) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = []

    @settings(max_examples=count * 3, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(pod=reviews.pods())
    def collect(pod: Any) -> None:
        if (len(pods) < count and isinstance(pod, dict)
                and isinstance(pod.get("metadata"), dict) and reviews.schema_valid(pod)):
            pods.append(pod)

    collect()
    return pods


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.admission_parity", description=__doc__)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--out", type=Path, default=Path("build/admission_parity.json"))
    args = parser.parse_args()
    pods = generated(args.pods)
    print(f"{len(pods)} schema-valid pods generated")
    differ: list[dict[str, Any]] = []
    refused = 0
    with LocalCluster() as cluster:
        tekton_cluster.install(cluster, None)
        install_crds(cluster)
        install_policy(cluster)
        webhook = webhook_replica(cluster, WEBHOOK_LABEL, "bench-parity")
        suffix = uuid.uuid4().hex[:5]
        pair = Pair(
            cluster,
            cluster.create_namespace(f"pol-{suffix}", labels={names.NAMESPACE_LABEL: "true"}),
            cluster.create_namespace(f"web-{suffix}", labels={WEBHOOK_LABEL: "true"}),
        )
        time.sleep(2)  # the binding reaches the API server's admission within a second
        started = time.monotonic()
        for i, pod in enumerate(pods):
            try:
                if pair.assert_same(pod) is None:
                    refused += 1
            except AssertionError as exc:
                differ.append({"pod": pod, "why": str(exc)[:2000]})
            if (i + 1) % 500 == 0:
                print(f"  {i + 1}/{len(pods)} compared, {len(differ)} differ", flush=True)
        elapsed = time.monotonic() - started
        webhook.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"pods": len(pods), "differ": len(differ),
                                    "refused_in_both": refused, "seconds": round(elapsed, 1),
                                    "examples": differ[:10]}, indent=2))
    for example in differ[:3]:
        print("DIFFERS:", example["why"][:500])
    print(f"admission parity: {len(pods)} pods, {len(differ)} differ "
          f"(refused in both: {refused})")


if __name__ == "__main__":
    main()
