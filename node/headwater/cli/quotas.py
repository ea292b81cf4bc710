"""``headwater quotas``: client quotas, as Kafka's ``kafka-configs --entity-type
users|clients`` sets them.

* ``quotas alter --user alice [--client-id app] --add-config producer_byte_rate=1048576,
  consumer_byte_rate=2097152 --delete-config request_percentage`` (Kafka's
  ``kafka-configs --alter --entity-type users --entity-name alice --entity-type clients
  --entity-name app --add-config ...``); ``--user-default`` / ``--client-id-default``
  name the default entity (``--entity-default``);
* ``quotas describe [--user U | --user-default] [--client-id C | --client-id-default]``:
  the quotas of the entities that match (no option: every entity); ``--output json``.

Keys: ``producer_byte_rate``, ``consumer_byte_rate`` (bytes per second) and
``request_percentage``; the broker refuses anything else, and values not above zero,
with Kafka's message.
"""

from __future__ import annotations

import argparse
from typing import Any

from headwater.cli._common import (
    CliError,
    add_bootstrap_option,
    add_output_option,
    admin_for,
    client_errors,
    print_json,
)
from headwater.client.admin.quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    Entity,
    QuotaAlteration,
    QuotaFilterComponent,
)


def register(sub: Any) -> None:
    quotas = sub.add_parser("quotas", help="client quotas of users and client ids")
    qsub = quotas.add_subparsers(dest="quotas_command", metavar="ACTION", required=True)
    p = qsub.add_parser("alter", help="set or delete quotas of a user, client id or both")
    _entity_options(p)
    p.add_argument(
        "--add-config",
        default="",
        metavar="K=V[,K=V...]",
        help="quotas to set, e.g. producer_byte_rate=1048576",
    )
    p.add_argument("--delete-config", default="", metavar="K[,K...]", help="quotas to remove")
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_alter)
    p = qsub.add_parser("describe", help="quotas of the matching entities")
    _entity_options(p)
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_describe)


def _entity_options(p: argparse.ArgumentParser) -> None:
    user = p.add_mutually_exclusive_group()
    user.add_argument("--user", help="a user (the principal's name)")
    user.add_argument("--user-default", action="store_true", help="the default user")
    client = p.add_mutually_exclusive_group()
    client.add_argument("--client-id", help="a client id")
    client.add_argument("--client-id-default", action="store_true", help="the default client id")


def _entity(args: argparse.Namespace) -> dict[str, str | None]:
    entity: dict[str, str | None] = {}
    if args.user is not None or args.user_default:
        entity["user"] = args.user
    if args.client_id is not None or args.client_id_default:
        entity["client-id"] = args.client_id
    return entity


def parse_add_config(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--add-config: {item!r} is not KEY=VALUE", exit_code=2)
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise CliError(f"--add-config: {key}={value!r} is not a number", exit_code=2) from None
    return out


def _alter(args: argparse.Namespace) -> int:
    entity = _entity(args)
    if not entity:
        raise CliError("name --user/--user-default and/or --client-id/--client-id-default", 2)
    ops: dict[str, float | None] = dict(parse_add_config(args.add_config))
    for key in filter(None, (s.strip() for s in args.delete_config.split(","))):
        if key in ops:
            raise CliError(f"{key} is both added and deleted", exit_code=2)
        ops[key] = None
    if not ops:
        raise CliError("nothing to do: give --add-config and/or --delete-config", exit_code=2)
    with client_errors(), admin_for(args) as admin:
        admin.alter_client_quotas([QuotaAlteration(entity, ops)])
    shown = _show(tuple(sorted(entity.items())))
    if args.output == "json":
        print_json({"entity": entity, "altered": {k: v for k, v in ops.items()}})
    else:
        print(f"Completed updating quotas for {shown}.")
    return 0


def _describe(args: argparse.Namespace) -> int:
    """Like ``kafka-configs --describe``: the named entity exactly (strict); nothing
    named, every entity."""
    components = []
    for entity_type, name, default in (
        ("user", args.user, args.user_default),
        ("client-id", args.client_id, args.client_id_default),
    ):
        if name is not None:
            components.append(QuotaFilterComponent(entity_type, MATCH_EXACT, name))
        elif default:
            components.append(QuotaFilterComponent(entity_type, MATCH_DEFAULT))
    with client_errors(), admin_for(args) as admin:
        found = admin.describe_client_quotas(components, strict=bool(components))
    if args.output == "json":
        print_json([{"entity": dict(entity), "quotas": values} for entity, values in found.items()])
        return 0
    for entity, values in found.items():
        shown = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
        print(f"Quota configs for {_show(entity)} are {shown}")
    return 0


def _show(entity: Entity) -> str:
    parts = []
    for entity_type, name in entity:
        label = "user-principal" if entity_type == "user" else entity_type
        parts.append(f"{label} '{name}'" if name is not None else f"the default {entity_type}")
    return ", ".join(parts)
