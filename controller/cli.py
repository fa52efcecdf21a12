"""The `tekton-coscheduler` command (and `kubectl coscheduler`, the same installed as a kubectl
plugin): run, reconcile, check, explain, version. docs/reference/cli.md documents it."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys
from collections.abc import Sequence
from pathlib import Path

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


FORMATS = ("text", "json", "yaml")  # -o: faces/terminal.py's emit
# What the commands a person runs share with kubectl: where the cluster is.
GLOBAL_FLAGS = (
    ("--kubeconfig", "PATH", "the kubeconfig file to use (default: KUBECONFIG, else "
                             "~/.kube/config; in a pod, its ServiceAccount)"),
    ("--context", "NAME", "the kubeconfig context to use (default: its current context)"),
)
OUTPUT_HELP = "text (the default), or a document: json, yaml (docs/reference/cli.md)"
OPERATOR_FLAGS = (
    ("--operator-namespace", "NS", "the operator's namespace (default: the pod's own in a pod, "
                                   "else tekton-coscheduler, the chart's)"),
    ("--service-account", "NAME", "the operator's ServiceAccount (default: the pod's own in a "
                                  "pod, else tekton-coscheduler, the chart's)"),
)


def prog() -> str:
    """`kubectl coscheduler` when kubectl runs us as its plugin (kubectl-coscheduler on PATH)."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "kubectl coscheduler" if name.startswith("kubectl-") else "tekton-coscheduler"


def parser() -> argparse.ArgumentParser:
    main_parser = argparse.ArgumentParser(
        prog=prog(),
        description="Puts every pod of a Tekton PipelineRun on one node. "
        "Configured by COSCHEDULER_* environment variables (see docs/user-guide/settings.md). "
        "Exit codes: 0 ok, 1 not ready or problems found, 2 usage, 3 cluster out of reach or a "
        "read refused, 4 run not found (docs/reference/cli.md).",
    )
    # kubectl's global flags, taken before or after the command: a subcommand's copy has no
    # default, so that it never overwrites the value given before the command.
    for flag, metavar, text in GLOBAL_FLAGS:
        main_parser.add_argument(flag, metavar=metavar, help=text)
    shared = argparse.ArgumentParser(add_help=False)
    for flag, metavar, text in GLOBAL_FLAGS:
        shared.add_argument(flag, metavar=metavar, help=text, default=argparse.SUPPRESS)
    sub = main_parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser(
        "run", parents=[shared],
        help="serve the admission webhook and run the reconciler beside it (the default)",
    )
    sub.add_parser(
        "reconcile", parents=[shared],
        help="only the reconciler (leader election, watches); `run` starts it itself",
    )
    check = sub.add_parser("check", parents=[shared],
                           help="settings, the cluster's prerequisites and the operator's "
                                "permissions, with a verdict")
    explain = sub.add_parser("explain", parents=[shared],
                             help="where a run's pods went and why, and every problem known")
    explain.add_argument("run", metavar="RUN", help="a PipelineRun's name (or NAMESPACE/RUN)")
    explain.add_argument("-n", "--namespace", metavar="NS",
                         help="the run's namespace (default: the context's, else default)")
    for command in (check, explain):
        command.add_argument("-o", "--output", choices=FORMATS, default="text", help=OUTPUT_HELP)
        for flag, metavar, text in OPERATOR_FLAGS:
            command.add_argument(flag, metavar=metavar, help=text)
    check.add_argument("--as-caller", action="store_true",
                       help="review the caller's own permissions, not the ServiceAccount's "
                            "(an operator run with these credentials, outside a cluster)")
    sub.add_parser("version", help="print the version")
    return main_parser


def main(argv: Sequence[str] | None = None) -> int:
    main_parser = parser()
    args = main_parser.parse_args(argv)

    if args.command == "version":
        print(f"tekton-coscheduler {__version__}")
        return 0
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"{prog()}: {exc}", file=sys.stderr)
        return 2
    if args.command in ("check", "explain"):
        # Which cluster, which operator, which output: the same for both commands.
        asked = {"kubeconfig": args.kubeconfig, "context": args.context, "output": args.output,
                 "operator_namespace": args.operator_namespace,
                 "service_account": args.service_account}
        if args.command == "check":
            from controller.faces.check import check

            return check(settings, as_caller=args.as_caller, **asked)
        from controller.faces import explain as explain_face

        return explain_face.run(settings, args.run, namespace=args.namespace, **asked)

    from controller.faces.logging import configure
    from controller.kube.connection import name_cluster

    name_cluster(args.kubeconfig, args.context)
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
