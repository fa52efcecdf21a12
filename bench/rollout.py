"""`make bench-rollout`: pod creations refused while the webhook's replicas are rolled, under load.

python -m bench.rollout [--count 30] [--hogs 2] [--which realnode kwok]

Runs the rollout scenarios N times each, in one pytest session per kind (a lab started once),
beside `--hogs` processes that each keep a core busy (CI's load: the rest of the suite):
- realnode: e2e/tests/test_realnode.py's real-Service rollout (the chart's Deployment on real
  kubelets, kube-proxy's rules, `kubectl rollout restart`, the leader's reconciler killed);
- kwok: e2e/tests/test_webhook_rollout.py's rolling replacement behind a Service made as
  kube-proxy makes one, with the suite's drain and the chart's.
Each rollout prints how many pod creations it saw and how many were refused; this counts them.
JSON in build/rollout.json, a plot in build/rollout.png. Last line:
`rollout: R rollouts, P pod creations, F refused (realnode r/p/f, kwok r/p/f), S scenarios failed`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "build"
SCENARIOS = {
    "realnode": ("e2e/tests/test_realnode.py", "rollout_restart",
                 re.compile(r"(\d+) pods admitted during the rollout, (\d+) refused")),
    "kwok": ("e2e/tests/test_webhook_rollout.py", "rolling",
             re.compile(r"pods created (\d+), failed (\d+)")),
}


def hogs(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def run(kind: str, count: int) -> dict[str, object]:
    path, selector, pattern = SCENARIOS[kind]
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "pytest", path, "-k", selector, "--count", str(count),
         "-o", "timeout=900", "-p", "no:cacheprovider", "-s", "-q"],
        cwd=REPO, capture_output=True, text=True)
    rollouts = [(int(made), int(refused)) for made, refused in pattern.findall(out.stdout)]
    summary = next((line for line in reversed(out.stdout.splitlines())
                    if " passed" in line or " failed" in line), "")
    failed = int(m.group(1)) if (m := re.search(r"(\d+) failed", summary)) else 0
    (BUILD / f"rollout-{kind}.log").write_text(out.stdout + out.stderr)
    return {"kind": kind, "rollouts": rollouts, "scenarios_failed": failed, "summary": summary,
            "seconds": round(time.monotonic() - started)}


def _totals(result: dict[str, object]) -> tuple[int, int, int]:
    """(rollouts, pod creations, refused)."""
    rollouts = result["rollouts"]
    assert isinstance(rollouts, list)
    return len(rollouts), sum(p for p, _ in rollouts), sum(f for _, f in rollouts)


def plot(results: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    for result in results:
        rollouts = result["rollouts"]
        assert isinstance(rollouts, list)
        ax.plot(range(1, len(rollouts) + 1), [f for _, f in rollouts], "o-",
                label=f"{result['kind']} ({sum(p for p, _ in rollouts)} creations)")
    ax.set_xlabel("rollout")
    ax.set_ylabel("pod creations refused")
    ax.set_ylim(bottom=-0.5)
    ax.legend()
    ax.set_title("Webhook rollouts under load: refused pod creations")
    fig.tight_layout()
    fig.savefig(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--which", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    args = parser.parse_args()
    BUILD.mkdir(exist_ok=True)
    load = hogs(args.hogs)
    try:
        results = [run(kind, args.count) for kind in args.which]
    finally:
        for hog in load:
            hog.kill()
    for result in results:
        count, made, refused = _totals(result)
        print(f"{result['kind']}: {count} rollouts, {made} pod creations, {refused} refused; "
              f"pytest: {result['summary']} ({result['seconds']} s)")
    (BUILD / "rollout.json").write_text(json.dumps(
        {"count": args.count, "hogs": args.hogs, "results": results}, indent=2))
    plot(results, BUILD / "rollout.png")

    every = {str(r["kind"]): _totals(r) for r in results}
    parts = ", ".join(f"{kind} {'/'.join(map(str, t))}" for kind, t in every.items())
    failed = sum(int(str(r["scenarios_failed"])) for r in results)
    print(f"rollout: {sum(t[0] for t in every.values())} rollouts, "
          f"{sum(t[1] for t in every.values())} pod creations, "
          f"{sum(t[2] for t in every.values())} refused ({parts}), {failed} scenarios failed")
    return 0 if failed == 0 and all(t[2] == 0 for t in every.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
