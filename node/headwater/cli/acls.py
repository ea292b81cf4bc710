"""``headwater acls add|list|remove``: Kafka's ``kafka-acls``, with its flags.

* ``acls add --allow-principal User:alice --operation Read --topic orders`` creates the
  product of principals x hosts x operations x resources (``--allow-host`` /
  ``--deny-host`` default ``*``; ``--operation`` defaults to ``All``).
  ``--producer`` (WRITE, DESCRIBE, CREATE on the topics; ``--idempotent`` adds
  IDEMPOTENT_WRITE on the cluster; ``--transactional-id`` WRITE, DESCRIBE on it) and
  ``--consumer`` (READ, DESCRIBE on the topics, READ on the ``--group``) are Kafka's
  shortcuts.  ``--resource-pattern-type literal|prefixed`` (default literal).
* ``acls list [resources] [--principal P] [--resource-pattern-type any|match|...]``:
  with no resource, every ACL.
* ``acls remove ...``: the ACLs matching the flags (principals, hosts and operations
  narrow the match; omitted, they match all).  A resource is required.

Through a broker (``--bootstrap``; the authorizer must be on, and the caller needs
ALTER / DESCRIBE on the cluster), or, with ``--zookeeper HOST:PORT[/chroot]``, straight
in ZooKeeper before any broker runs (Kafka's ``--authorizer-properties
zookeeper.connect=...``): how a new cluster's inter-broker ACL is written.
``--output json`` prints the bindings as objects.  Operation names are Kafka's,
case-insensitive (``Read``, ``DescribeConfigs``, ``describe-configs``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from headwater.cli import zk_auth
from headwater.cli._common import (
    CliError,
    add_bootstrap_option,
    add_output_option,
    admin_for,
    client_errors,
    print_json,
)
from headwater.coordination import session
from headwater.coordination.acls import AccessDenied, AclZkStore
from headwater.coordination.zk_security import ZkAuth
from headwater.security.acls import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
    binding,
)

Op = AclOperation
PATTERN_TYPES = ("literal", "prefixed", "match", "any")
DIGEST_PASSWORD_ENV = zk_auth.DIGEST_PASSWORD_ENV


def register(sub: Any) -> None:
    acls = sub.add_parser("acls", help="ACLs of Kafka's authorizer (kafka-acls)")
    asub = acls.add_subparsers(dest="acls_command", metavar="ACTION", required=True)
    p = asub.add_parser("add", help="create ACLs")
    _resources(p)
    _entries(p)
    p.add_argument("--producer", action="store_true", help="ACLs a producer needs")
    p.add_argument("--consumer", action="store_true", help="ACLs a consumer needs (--group)")
    p.add_argument(
        "--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE too"
    )
    _common(p)
    p.set_defaults(func=_add)

    p = asub.add_parser("list", help="list ACLs")
    _resources(p)
    p.add_argument("--principal", help="only the ACLs of this principal")
    _common(p)
    p.set_defaults(func=_list)

    p = asub.add_parser("remove", help="delete ACLs")
    _resources(p)
    _entries(p)
    p.add_argument("--force", action="store_true", help="accepted for kafka-acls habits")
    _common(p)
    p.set_defaults(func=_remove)


def _resources(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", action="append", default=[], metavar="NAME")
    p.add_argument("--group", action="append", default=[], metavar="NAME")
    p.add_argument("--transactional-id", action="append", default=[], metavar="ID")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument(
        "--resource-pattern-type",
        choices=PATTERN_TYPES,
        type=str.lower,
        default=None,
        help="literal (default), prefixed; list and remove also take match and any",
    )


def _entries(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--allow-host", action="append", default=[], metavar="IP")
    p.add_argument("--deny-host", action="append", default=[], metavar="IP")
    p.add_argument(
        "--operation", action="append", default=[], metavar="OP", help="repeatable; default All"
    )


def _common(p: argparse.ArgumentParser) -> None:
    add_bootstrap_option(p)
    p.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help="read/write ZooKeeper directly instead of asking a broker (default chroot /headwater)",
    )
    zk_auth.add_option(p)
    add_output_option(p)


def parse_operation(text: str) -> AclOperation:
    wanted = text.replace("-", "").replace("_", "").lower()
    for op in AclOperation:
        if op not in (Op.ANY, Op.UNKNOWN) and op.zk_name.lower() == wanted:
            return op
    names = ", ".join(o.zk_name for o in AclOperation if o not in (Op.ANY, Op.UNKNOWN))
    raise CliError(f"unknown --operation {text!r}; one of {names}", exit_code=2)


def _pattern_type(args: argparse.Namespace, *, concrete: bool) -> PatternType:
    chosen = args.resource_pattern_type or "literal"
    if concrete and chosen not in ("literal", "prefixed"):
        raise CliError(
            f"--resource-pattern-type {chosen} is for list and remove; add takes literal or "
            "prefixed",
            exit_code=2,
        )
    return PatternType[chosen.upper()]


def _named_resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    """The ACLs ``acls add`` means (ValueError / CliError on a bad combination)."""
    pattern = _pattern_type(args, concrete=True)
    if not args.allow_principal and not args.deny_principal:
        raise CliError("add needs --allow-principal or --deny-principal", exit_code=2)
    wanted: list[tuple[ResourceType, str, AclOperation]] = []
    if args.producer or args.consumer:
        if args.operation:
            raise CliError("--operation does not go with --producer/--consumer", exit_code=2)
        if not args.topic:
            raise CliError("--producer/--consumer need --topic", exit_code=2)
        if args.producer:
            wanted += [
                (ResourceType.TOPIC, t, op)
                for t in args.topic
                for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)
            ]
            wanted += [
                (ResourceType.TRANSACTIONAL_ID, x, op)
                for x in args.transactional_id
                for op in (Op.WRITE, Op.DESCRIBE)
            ]
            if args.idempotent:
                wanted.append((ResourceType.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE))
        if args.consumer:
            if not args.group:
                raise CliError("--consumer needs --group", exit_code=2)
            wanted += [
                (ResourceType.TOPIC, t, op) for t in args.topic for op in (Op.READ, Op.DESCRIBE)
            ]
            wanted += [(ResourceType.GROUP, g, Op.READ) for g in args.group]
    else:
        resources = _named_resources(args)
        if not resources:
            raise CliError(
                "name a resource: --topic, --group, --transactional-id or --cluster", exit_code=2
            )
        ops = [parse_operation(o) for o in args.operation] or [Op.ALL]
        wanted = [(rtype, rname, op) for (rtype, rname), op in itertools.product(resources, ops)]
    out: list[AclBinding] = []
    for perm, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host or ["*"]),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host or ["*"]),
    ):
        for principal, host, (rtype, rname, op) in itertools.product(principals, hosts, wanted):
            out.append(
                binding(
                    resource_type=rtype,
                    name=rname,
                    principal=principal,
                    operation=op,
                    permission_type=perm,
                    host=host,
                    pattern_type=PatternType.LITERAL if rtype is ResourceType.CLUSTER else pattern,
                )
            )
    return sorted(set(out))


def filters_for(args: argparse.Namespace, *, removing: bool) -> list[AclBindingFilter]:
    """The filters ``acls list`` / ``acls remove`` mean."""
    resources = _named_resources(args)
    if removing and not resources:
        raise CliError(
            "remove needs a resource: --topic, --group, --transactional-id or --cluster",
            exit_code=2,
        )
    pattern = _pattern_type(args, concrete=False)
    patterns = [
        ResourcePatternFilter(
            rtype,
            rname,
            PatternType.LITERAL
            if rtype is ResourceType.CLUSTER and pattern is PatternType.PREFIXED
            else pattern,
        )
        for rtype, rname in resources
    ] or [ResourcePatternFilter()]
    if not removing:
        return [
            AclBindingFilter(p, AccessControlEntryFilter(principal=args.principal))
            for p in patterns
        ]
    entries: list[AccessControlEntryFilter] = []
    ops = [parse_operation(o) for o in args.operation] or [Op.ANY]
    for perm, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host),
    ):
        if not principals and not hosts:
            continue
        for principal, host, op in itertools.product(principals or [None], hosts or [None], ops):
            entries.append(AccessControlEntryFilter(principal, host, op, perm))
    if not entries:
        entries = [AccessControlEntryFilter(operation=op) for op in ops]
    return [AclBindingFilter(p, e) for p, e in itertools.product(patterns, entries)]


def binding_json(b: AclBinding) -> dict[str, str]:
    return {
        "resource_type": b.pattern.resource_type.name,
        "resource_name": b.pattern.name,
        "pattern_type": b.pattern.pattern_type.name,
        "principal": b.entry.principal,
        "host": b.entry.host,
        "operation": b.entry.operation.name,
        "permission_type": b.entry.permission_type.name,
    }


def _print(bindings: Sequence[AclBinding], args: argparse.Namespace, *, title: str) -> None:
    if args.output == "json":
        print_json([binding_json(b) for b in bindings])
        return
    by_pattern: dict[Any, list[AclBinding]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, []).append(b)
    if not by_pattern:
        print(f"{title}: none")
    for pattern, group in sorted(by_pattern.items()):
        print(
            f"{title} for resource `ResourcePattern(resourceType={pattern.resource_type.name}, "
            f"name={pattern.name}, patternType={pattern.pattern_type.name})`:"
        )
        for b in group:
            e = b.entry
            print(
                f" \t(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
                f"permissionType={e.permission_type.name})"
            )


@contextlib.contextmanager
def _zookeeper(connect: str, auth: ZkAuth | None) -> Iterator[AclZkStore]:
    try:
        client = session.connect(connect, connection_timeout_ms=10000, auth=auth)
    except ValueError as exc:
        raise CliError(f"--zookeeper: {exc}", exit_code=2) from None
    except Exception as exc:  # kazoo's timeout and connection errors
        raise CliError(f"cannot reach ZooKeeper at {connect}: {exc}") from None
    try:
        store = AclZkStore(client)
        store.ensure_paths()
        yield store
    except AccessDenied:
        raise CliError(
            "ZooKeeper refused access to the ACL znodes (zookeeper.set.acl): " + zk_auth.HOW
        ) from None
    finally:
        session.close(client)


@contextlib.contextmanager
def _bad_input() -> Iterator[None]:
    """A ValueError of the ACL model (a bad principal, host...) is a usage error."""
    try:
        yield
    except ValueError as exc:
        raise CliError(str(exc), exit_code=2) from None


Entries = frozenset[AccessControlEntry]


def _with(added: Entries) -> Callable[[Entries], Entries]:
    return lambda entries: entries | added


def _without(gone: Entries) -> Callable[[Entries], Entries]:
    return lambda entries: entries - gone


def _add(args: argparse.Namespace) -> int:
    with _bad_input():
        wanted = bindings_to_add(args)
    if args.zookeeper:
        with _zookeeper(args.zookeeper, zk_auth.digest_auth(args)) as store:
            by_pattern: dict[Any, set[Any]] = {}
            for b in wanted:
                by_pattern.setdefault(b.pattern, set()).add(b.entry)
            with client_errors():
                for pattern, entries in by_pattern.items():
                    store.update(pattern, _with(frozenset(entries)))
    else:
        with client_errors(), admin_for(args) as admin:
            results = admin.create_acls(wanted)
        failed = [(b, e) for b, e in zip(wanted, results, strict=True) if e is not None]
        if failed:
            b, e = failed[0]
            raise CliError(f"{len(failed)} of {len(wanted)} ACLs not created; {b}: {e}")
    _print(wanted, args, title="Adding ACLs")
    return 0


def _list(args: argparse.Namespace) -> int:
    with _bad_input():
        filters = filters_for(args, removing=False)
    found: set[AclBinding] = set()
    if args.zookeeper:
        with _zookeeper(args.zookeeper, zk_auth.digest_auth(args)) as store:
            acls = store.load_all()
        for pattern, entries in acls.items():
            for e in entries:
                b = AclBinding(pattern, e)
                if any(f.matches(b) for f in filters):
                    found.add(b)
    else:
        with client_errors(), admin_for(args) as admin:
            for f in filters:
                found.update(admin.describe_acls(f))
    _print(sorted(found), args, title="Current ACLs")
    return 0


def _remove(args: argparse.Namespace) -> int:
    with _bad_input():
        filters = filters_for(args, removing=True)
    removed: set[AclBinding] = set()
    if args.zookeeper:
        with _zookeeper(args.zookeeper, zk_auth.digest_auth(args)) as store:
            for pattern, entries in store.load_all().items():
                gone = {
                    e for e in entries if any(f.matches(AclBinding(pattern, e)) for f in filters)
                }
                if gone:
                    store.update(pattern, _without(frozenset(gone)))
                    removed.update(AclBinding(pattern, e) for e in gone)
    else:
        with client_errors(), admin_for(args) as admin:
            for deleted in admin.delete_acls(filters):
                removed.update(deleted)
    _print(sorted(removed), args, title="Removed ACLs")
    return 0


__all__ = ["bindings_to_add", "filters_for", "parse_operation", "register"]
