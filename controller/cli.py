"""The `tekton-coscheduler` command: run, check, version."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys
from collections.abc import Sequence

from controller import __version__
from controller.settings import SettingsError, load_settings


def long_lived() -> None:
    """What is imported lives as long as the process: left out of the collector's full passes.
    The modules (the kubernetes client, kopf, pydantic) are some 81,000 tracked objects of the
    200,000 a reconciler holds at 100 live runs, and a full pass walks every one with the GIL
    held, the webhook answering nothing meanwhile: 0.15 to 0.26 s a pass in bench-scale (a
    counting gc callback in the reconciler), about one every hundred runs. A full pass over the
    imports alone took 73 ms on the quiet machine. The collection first (once, some 0.1 s at
    start) keeps the import's own garbage out of what is frozen for good."""
    gc.collect()
    gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tekton-coscheduler",
        description="Puts every pod of a Tekton PipelineRun on one node. "
        "Configured by COSCHEDULER_* environment variables (see docs/user-guide/settings.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "run", help="serve the admission webhook and run the reconciler beside it (the default)"
    )
    sub.add_parser(
        "reconcile", help="only the reconciler (leader election, watches); `run` starts it itself"
    )
    sub.add_parser("check", help="validate settings and cluster prerequisites, print a verdict")
    explain = sub.add_parser(
        "explain", help="where a run's pods went and why, and every problem known, for a person"
    )
    explain.add_argument("run", metavar="NAMESPACE/RUN")
    sub.add_parser("version", help="print the version")
    args = parser.parse_args(argv)

    if args.command == "version":
        print(f"tekton-coscheduler {__version__}")
        return 0
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"tekton-coscheduler: {exc}", file=sys.stderr)
        return 2
    if args.command == "check":
        from controller.faces.check import check

        return check(settings)
    if args.command == "explain":
        from controller.faces import explain as explain_face

        return explain_face.run(settings, args.run)

    from controller.faces.logging import configure

    configure(settings.log_level, settings.log_format)
    with contextlib.suppress(KeyboardInterrupt):
        if args.command == "reconcile":
            from controller.faces import reconciler, supervise

            supervise.die_with_parent()
            long_lived()
            return asyncio.run(reconciler.run(settings))
        from controller.faces import app

        long_lived()
        return asyncio.run(app.run(settings))
    return 130
