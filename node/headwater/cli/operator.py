"""``headwater operator``: run the Kubernetes operator (kopf) with ``kopf run``'s flags.

The operator is an optional extra (``headwater[operator]``), so the
``headwater_operator`` package (and through it kopf) is imported only when the command
runs, and its absence is one line; the rest of the CLI works without it.  This is the
one module of ``headwater`` that imports ``headwater_operator`` (``.importlinter``,
the core-apart contract).  Settings not on the command line come
from the environment the Helm chart sets (``HEADWATER_BOOTSTRAP``,
``HEADWATER_BROKER_STATEFULSET``, ``POD_NAMESPACE``, ``POD_NAME``,
``HEADWATER_OPERATOR_METRICS_PORT``).  With ``--peering`` and no
``--priority``, each replica takes a distinct priority derived from its pod
name, since kopf pauses every replica when priorities tie.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from headwater.cli._common import CliError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "operator",
        help="run the Kubernetes operator (Topics, safe rolling restarts)",
        description="Run the kopf operator; flags follow `kopf run`.",
    )
    p.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="namespace to serve (repeatable; default: $POD_NAMESPACE)",
    )
    p.add_argument("-A", "--all-namespaces", action="store_true", help="serve every namespace")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--standalone", action="store_true", help="no peering with other replicas")
    mode.add_argument("--peering", metavar="NAME", help="the KopfPeering object to elect through")
    p.add_argument("--priority", type=int, help="peering priority (default: from $POD_NAME)")
    p.add_argument("--liveness", metavar="URL", help="serve kopf's liveness probe at URL")
    p.add_argument("--bootstrap", help="brokers to connect to (default: $HEADWATER_BOOTSTRAP)")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--debug", action="store_true")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        from headwater_operator.config import OperatorConfig, peering_priority
        from headwater_operator.run import run_operator
    except ModuleNotFoundError as exc:
        raise CliError(
            f"the operator needs the [operator] extra ({exc.name} is missing): "
            "pip install 'headwater[operator]'"
        ) from None
    try:
        config = OperatorConfig.from_env(os.environ)
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2) from None
    namespaces = list(args.namespace) or ([config.namespace] if not args.all_namespaces else [])
    if len(namespaces) == 1:
        config = dataclasses.replace(config, namespace=namespaces[0])
    if args.bootstrap:
        config = dataclasses.replace(config, bootstrap=args.bootstrap)
    priority = args.priority
    if priority is None and args.peering:
        priority = peering_priority(config.pod_name)
    run_operator(
        config,
        namespaces=namespaces,
        clusterwide=bool(args.all_namespaces),
        standalone=bool(args.standalone),
        peering_name=args.peering,
        priority=priority,
        liveness_endpoint=args.liveness,
        verbose=args.verbose,
        debug=args.debug,
        quiet=args.quiet,
    )
    return 0
