"""Runs a local cluster until interrupted, e.g. for the demo or for poking at it by hand.

.venv/bin/python -m e2e.harness.cluster [--nodes 3] [--tekton]
"""

from __future__ import annotations

import argparse
import signal
import threading
import time

from .local import LocalCluster


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m e2e.harness.cluster", description=__doc__)
    parser.add_argument("--nodes", type=int, default=3, help="fake kwok nodes to add")
    parser.add_argument("--tekton", action="store_true", help="also run Tekton Pipelines")
    args = parser.parse_args()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    t0 = time.monotonic()
    with LocalCluster() as cluster:
        if args.nodes:
            cluster.add_nodes(args.nodes)
        if args.tekton:
            cluster.start_tekton()
        print(f"cluster up in {time.monotonic() - t0:.1f}s; logs in {cluster.logs_dir}")
        print(f"export KUBECONFIG={cluster.kubeconfig}", flush=True)
        stop.wait()
        print("stopping")


if __name__ == "__main__":
    main()
