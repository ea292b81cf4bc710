"""``headwater console``: serve Headwater Console, a web app to see and administer a cluster.

The console connects with the same ``--bootstrap`` and ``--command-config`` (TLS, SASL) as
every other command, so the brokers' ACLs decide what it shows and what it may change;
``--read-only`` refuses every change whatever the ACLs allow.  It needs the ``[console]``
extra (aiohttp, Jinja2), imported only when the command runs.  Before serving it checks
that it can describe the cluster, so a wrong address or identity is one line, not a page
of errors later.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from headwater import errors
from headwater.cli._common import CliError, add_bootstrap_option, security_for
from headwater.client.transport.security import ClientSecurity

DEFAULT_PORT = 8080


def describe_identity(security: ClientSecurity) -> str:
    """Who the console acts as, for its pages (never a password)."""
    if security.uses_sasl:
        return f"User:{security.sasl_plain_username} ({security.sasl_mechanism})"
    if security.ssl_certfile:
        return f"the TLS client certificate {security.ssl_certfile}"
    return f"ANONYMOUS ({security.security_protocol})"


def _run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port {args.port}: expected 0 to 65535", exit_code=2)
    try:
        from headwater.console.app import OperatorAccess, Settings, make_app
        from headwater.console.backend import ClientOptions, ClusterView
        from headwater.console.operator_progress import reader_from
        from headwater.console.server import run
    except ModuleNotFoundError as exc:
        raise CliError(
            f"the console needs the [console] extra ({exc.name} is missing): "
            "pip install 'headwater[console]'"
        ) from None
    security = security_for(args)
    options = ClientOptions(args.bootstrap, args.request_timeout_ms, security)
    try:
        view = ClusterView(options)
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2) from None
    try:
        try:
            desc = view.admin.describe_cluster()
        except errors.HeadwaterError as exc:
            raise CliError(f"cannot describe the cluster at {args.bootstrap}: {exc}") from None
        settings = Settings(read_only=args.read_only, identity=describe_identity(security))
        reader, why = reader_from(
            kubeconfig=args.kubeconfig,
            namespace=args.k8s_namespace,
            statefulset=args.broker_statefulset,
        )
        app = make_app(view, settings, OperatorAccess(reader, why))

        def ready(port: int) -> None:
            mode = " (read-only)" if args.read_only else ""
            print(
                f"Headwater Console{mode} for cluster {desc.cluster_id} at "
                f"http://{args.host}:{port}/ as {settings.identity}",
                flush=True,
            )
            if reader is None:
                print(f"note: {why}", flush=True)
            else:
                print(
                    f"Operator progress from StatefulSet {reader.namespace}/{reader.statefulset}",
                    flush=True,
                )

        try:
            run(app, args.host, args.port, ready)
        except OSError as exc:
            raise CliError(
                f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
            ) from None
    finally:
        view.close()
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "console",
        help="serve Headwater Console, a web app for the cluster",
        description=(
            "Serve Headwater Console: the cluster, topics, messages and consumer groups in a "
            "browser. It connects as the identity of --command-config (TLS, SASL), so users "
            "see and change only what that principal's ACLs allow."
        ),
        epilog=(
            "example: headwater console --bootstrap 127.0.0.1:9092 --port 8080 --read-only; "
            "the console has no login of its own: bind it to 127.0.0.1 (the default) or put "
            "it behind an authenticating proxy."
        ),
    )
    add_bootstrap_option(p)
    p.add_argument(
        "--host",
        default=os.environ.get("HEADWATER_CONSOLE_HOST", "127.0.0.1"),
        help="address to listen on (default: $HEADWATER_CONSOLE_HOST or %(default)s)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=os.environ.get("HEADWATER_CONSOLE_PORT", str(DEFAULT_PORT)),
        help="port to listen on, 0 for any free one (default: %(default)s)",
    )
    p.add_argument(
        "--read-only",
        action="store_true",
        default=os.environ.get("HEADWATER_CONSOLE_READ_ONLY", "") in ("1", "true"),
        help="refuse every change (create, delete, produce, reset offsets); "
        "also $HEADWATER_CONSOLE_READ_ONLY=true",
    )
    p.add_argument(
        "--kubeconfig",
        default=os.environ.get("HEADWATER_CONSOLE_KUBECONFIG") or None,
        help="a kubeconfig to read the operator's rolls and scaling from the brokers' "
        "StatefulSet (in a pod with a ServiceAccount token that token is used; without "
        "either the Operator page says it needs Kubernetes access)",
    )
    p.add_argument(
        "--k8s-namespace",
        default=os.environ.get("HEADWATER_CONSOLE_K8S_NAMESPACE") or None,
        help="the brokers' namespace (default: the pod's own, or the kubeconfig context's)",
    )
    p.add_argument(
        "--broker-statefulset",
        default=os.environ.get("HEADWATER_CONSOLE_BROKER_STATEFULSET", "headwater-broker"),
        help="the brokers' StatefulSet (default: $HEADWATER_CONSOLE_BROKER_STATEFULSET or "
        "%(default)s; the chart's is <release>-headwater-broker)",
    )
    p.set_defaults(func=_run)
