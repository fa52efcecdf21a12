"""`make fuzz`: a million admission requests through the webhook's answer, judged by the oracle
of tests/fuzz/reviews.py.

    python -m tests.fuzz [--requests 1000000] [--workers 2] [--seed 1]

Hypothesis draws a corpus of bodies (reviews of generated pods, broken reviews, junk); workers
then mutate them at random (drop a key, swap in junk or an empty value, change a label, cut or
flip bytes) and judge every answer. Findings are kept (up to 20) in build/fuzz.json with the
body that produced them. Last line:
`fuzz: N requests, C crashes, P invalid patches, F other findings`.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import multiprocessing
import random
import sys
import time
from pathlib import Path
from typing import Any

import structlog
from hypothesis import HealthCheck, Phase, given, settings

from tests.conftest import StaticFacts
from tests.fuzz import reviews

JUNK: list[Any] = [None, {}, [], "", 0, -1, True, "x" * 64, "ünï", {"a": [1, {"b": None}]}, 1e308]
LABEL_KEYS = ["tekton.dev/pipelineRun", "tekton.dev/pipelineRunUID", "tekton.dev/taskRun",
              "app.kubernetes.io/component", "app.kubernetes.io/managed-by"]


def corpus(size: int, seed: int) -> list[tuple[bytes, StaticFacts]]:
    found: list[tuple[bytes, StaticFacts]] = []

    @settings(max_examples=size, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(body=reviews.bodies(), facts=reviews.facts())
    def collect(body: bytes, facts: StaticFacts) -> None:
        found.append((body, facts))

    random.seed(seed)
    collect()
    return found


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.extend(_paths(value, (*prefix, i)))
    return out


def mutate(body: bytes, rng: random.Random) -> bytes:
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if doc is None or rng.random() < 0.05:
        data = bytearray(body)
        if data and rng.random() < 0.5:
            data[rng.randrange(len(data))] = rng.randrange(256)
        else:
            del data[rng.randrange(len(data) + 1):]
        return bytes(data)
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _paths(doc) if p]
        op = rng.random()
        if op < 0.35:
            labels = (((doc.get("request") or {}).get("object") or {}).get("metadata") or {}) \
                if isinstance(doc, dict) and isinstance(doc.get("request"), dict) \
                and isinstance(doc["request"].get("object"), dict) else {}
            if isinstance(labels, dict) and isinstance(labels.get("labels"), dict):
                key = rng.choice(LABEL_KEYS)
                labels["labels"][key] = rng.choice([*JUNK, "a" * 63, "run-1", "6f1d0c2a"])
            continue
        if not paths:
            break
        path = rng.choice(paths)
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        if op < 0.6 and isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(JUNK))
    return json.dumps(doc).encode()


def work(args: tuple[list[tuple[bytes, StaticFacts]], int, int]) -> dict[str, Any]:
    seeds, count, seed = args
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    rng = random.Random(seed)
    tally = reviews.Tally()
    findings: list[dict[str, str]] = []
    counts = {"crashes": 0, "invalid_patches": 0, "other": 0}
    for _ in range(count):
        body, facts = rng.choice(seeds)
        if rng.random() < 0.9:
            body = mutate(body, rng)
        try:
            reviews.judge(body, facts, tally)
        except reviews.Finding as finding:
            text = str(finding)
            kind = ("crashes" if "raised" in text or "escaped" in text or "status" in text
                    else "invalid_patches" if "patch" in text or "schema" in text or "term" in text
                    else "other")
            counts[kind] += 1
            if len(findings) < 20:
                findings.append({"kind": kind, "finding": text[:500],
                                 "body": body.decode(errors="replace")[:4000]})
    return {"tally": tally.__dict__, "counts": counts, "findings": findings}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--corpus", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("build/fuzz.json"))
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))

    started = time.monotonic()
    seeds = corpus(args.corpus, args.seed)
    print(f"corpus: {len(seeds)} bodies drawn by hypothesis in {time.monotonic() - started:.0f}s")
    share = [args.requests // args.workers + (i < args.requests % args.workers)
             for i in range(args.workers)]
    jobs = [(seeds, n, args.seed * 1000 + i) for i, n in enumerate(share)]
    started = time.monotonic()
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        results = pool.map(work, jobs)
    elapsed = time.monotonic() - started

    tried = sum(r["tally"]["tried"] for r in results)
    counts = {k: sum(r["counts"][k] for r in results) for k in results[0]["counts"]}
    outcomes: dict[str, int] = {}
    for r in results:
        for k, v in r["tally"]["outcomes"].items():
            outcomes[k] = outcomes.get(k, 0) + v
    patched = sum(r["tally"]["patched"] for r in results)
    schema = sum(r["tally"]["schema_checked"] for r in results)
    findings = [f for r in results for f in r["findings"]][:20]
    print(f"{tried} requests in {elapsed:.0f}s ({tried / elapsed:.0f}/s on {args.workers} workers)")
    print("answers by outcome: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    print(f"patches applied and checked: {patched}; of schema-valid pods, re-validated: {schema}")
    for finding in findings[:5]:
        print(f"FINDING ({finding['kind']}): {finding['finding']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "requests": tried, "seconds": round(elapsed, 1), "workers": args.workers,
        "outcomes": outcomes, "patched": patched, "schema_checked": schema, **counts,
        "findings": findings,
    }, indent=2))
    print(f"fuzz: {tried} requests, {counts['crashes']} crashes, "
          f"{counts['invalid_patches']} invalid patches, {counts['other']} other findings")
    return 0 if not any(counts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
