"""``headwater users``: SCRAM credentials, as Kafka's ``kafka-configs --entity-type users``.

* ``users scram-set USER --mechanism SCRAM-SHA-512 [--iterations N]`` reads the password
  from ``--password-file``, else from standard input when it is not a terminal, else
  from a prompt (asked twice).  Never from the command line: argv is visible to every
  user of the machine (``ps``) and lands in shell histories.
* ``users scram-delete USER --mechanism M`` and ``users describe [USER...]``
  (mechanisms and iteration counts, never salts or keys).

Through a broker (``--bootstrap``; the Admin API salts and hashes in this process)
or, with ``--zookeeper HOST:PORT[/chroot]``, straight into ZooKeeper before any broker
runs: Kafka's way to create the inter-broker or admin user of a new cluster.  Both
write the same znodes; running brokers pick the change up from its notification.  On a
``zookeeper.set.acl`` cluster ``--zookeeper`` needs the brokers' digest identity
(:mod:`headwater.cli.zk_auth`: ``--zookeeper-digest-username`` and the password from
``$HEADWATER_ZOOKEEPER_DIGEST_PASSWORD`` or ``--command-config``); without it ZooKeeper
refuses, and the command says so in one line, having changed nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from headwater import errors
from headwater.cli import zk_auth
from headwater.cli._common import (
    CliError,
    add_bootstrap_option,
    add_output_option,
    admin_for,
    client_errors,
    print_json,
)
from headwater.client.admin_scram import (
    DEFAULT_ITERATIONS,
    SALT_BYTES,
    ScramDeletion,
    ScramUpsertion,
    UserScramCredentialsDescription,
)
from headwater.coordination import session
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.coordination.zk_security import AccessDenied, ZkAuth
from headwater.security import scram
from headwater.security.scram import ScramCredential, ScramMechanism

MECHANISMS = tuple(m.value for m in ScramMechanism)


def register(sub: Any) -> None:
    users = sub.add_parser("users", help="SCRAM credentials of users (SASL)")
    usub = users.add_subparsers(dest="users_command", metavar="ACTION", required=True)

    p = usub.add_parser("scram-set", help="create or replace a user's SCRAM credential")
    p.add_argument("user")
    p.add_argument("--mechanism", choices=MECHANISMS, default="SCRAM-SHA-512")
    p.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        help=f"{scram.MIN_ITERATIONS}..{scram.MAX_ITERATIONS} (default: %(default)s)",
    )
    p.add_argument(
        "--password-file",
        type=Path,
        help="file whose first line is the password (default: stdin, or a prompt)",
    )
    _common(p)
    p.set_defaults(func=_set)

    p = usub.add_parser("scram-delete", help="delete a user's SCRAM credential")
    p.add_argument("user")
    p.add_argument("--mechanism", choices=MECHANISMS, default="SCRAM-SHA-512")
    _common(p)
    p.set_defaults(func=_delete)

    p = usub.add_parser("describe", help="users' SCRAM mechanisms and iterations")
    p.add_argument("users", nargs="*", metavar="USER", help="default: every user")
    _common(p)
    p.set_defaults(func=_describe)


def _common(p: argparse.ArgumentParser) -> None:
    add_bootstrap_option(p)
    p.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help="write/read ZooKeeper directly instead of asking a broker (bootstrap a cluster; "
        "default chroot /headwater)",
    )
    zk_auth.add_option(p)
    add_output_option(p)


def read_password(args: argparse.Namespace) -> str:
    """From ``--password-file``, piped stdin, or a prompt; never argv."""
    if args.password_file is not None:
        try:
            text = args.password_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot read --password-file: {exc.strerror}", exit_code=2) from None
        password = text.splitlines()[0] if text else ""
    elif not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"Password for {args.user}: ")
        if getpass.getpass("Again: ") != password:
            raise CliError("the passwords differ", exit_code=2)
    if not password:
        raise CliError("empty password", exit_code=2)
    return password


@contextlib.contextmanager
def _zookeeper(args: argparse.Namespace) -> Iterator[ScramCredentialStore]:
    connect: str = args.zookeeper
    auth: ZkAuth | None = zk_auth.digest_auth(args)
    try:
        client = session.connect(connect, connection_timeout_ms=10000, auth=auth)
    except ValueError as exc:
        raise CliError(f"--zookeeper: {exc}", exit_code=2) from None
    except AccessDenied:  # creating the chroot under a znode of the brokers'
        raise CliError(f"ZooKeeper refused access to {connect}: " + zk_auth.HOW) from None
    except Exception as exc:  # kazoo's timeout and connection errors
        raise CliError(f"cannot reach ZooKeeper at {connect}: {exc}") from None
    try:
        yield ScramCredentialStore(client)
    except AccessDenied:
        who = f"as {auth.username!r}" if auth is not None else "without an identity"
        raise CliError(
            f"ZooKeeper refused access to the users' credentials {who} (zookeeper.set.acl): "
            + zk_auth.HOW
        ) from None
    finally:
        session.close(client)


def _set(args: argparse.Namespace) -> int:
    if not args.user:
        raise CliError("the user name must not be empty", exit_code=2)
    password = read_password(args)
    if args.zookeeper:
        try:
            scram.check_iterations(args.iterations)
        except ValueError as exc:
            raise CliError(f"UNACCEPTABLE_CREDENTIAL: {exc}", exit_code=2) from None
        mechanism = ScramMechanism.from_name(args.mechanism)
        credential = ScramCredential.from_password(
            mechanism, password, salt=secrets.token_bytes(SALT_BYTES), iterations=args.iterations
        )
        with _zookeeper(args) as store, client_errors():
            store.alter(args.user, upsertions={mechanism: credential})
    else:
        with client_errors(), admin_for(args) as admin:
            admin.alter_user_scram_credentials(
                [ScramUpsertion(args.user, args.mechanism, args.iterations, password)]
            )
    _done(args, "set", {"mechanism": args.mechanism, "iterations": args.iterations})
    return 0


def _delete(args: argparse.Namespace) -> int:
    if args.zookeeper:
        with _zookeeper(args) as store, client_errors():
            store.alter(args.user, deletions=[ScramMechanism.from_name(args.mechanism)])
    else:
        with client_errors(), admin_for(args) as admin:
            admin.alter_user_scram_credentials(deletions=[ScramDeletion(args.user, args.mechanism)])
    _done(args, "deleted", {"mechanism": args.mechanism})
    return 0


def _done(args: argparse.Namespace, what: str, extra: dict[str, Any]) -> None:
    if args.output == "json":
        print_json({"user": args.user, what: True, **extra})
    else:
        print(f"{what.capitalize()} {args.mechanism} credential of user {args.user}")


def _describe(args: argparse.Namespace) -> int:
    described: dict[str, list[tuple[str, int]]] = {}
    if args.zookeeper:
        with _zookeeper(args) as store, client_errors():
            for user in args.users or store.list_users():
                creds = store.read(user)
                if not creds and args.users:
                    raise CliError(f"RESOURCE_NOT_FOUND: user {user!r} has no SCRAM credential")
                if creds:
                    described[user] = [
                        (m.value, c.iterations)
                        for m, c in sorted(creds.items(), key=lambda kv: kv[0].value)
                    ]
    else:
        with client_errors(), admin_for(args) as admin:
            result = admin.describe_user_scram_credentials(args.users or None)
        for user, desc in result.items():
            if isinstance(desc, errors.HeadwaterError):  # raise_on_error=True raised it
                raise CliError(str(desc))
            described[user] = _infos(desc)
    if args.output == "json":
        print_json(
            [
                {
                    "user": user,
                    "credentials": [{"mechanism": m, "iterations": i} for m, i in infos],
                }
                for user, infos in described.items()
            ]
        )
    else:
        for user, infos in described.items():
            for mechanism, iterations in infos:
                print(f"{user}\t{mechanism}\titerations={iterations}")
    return 0


def _infos(desc: UserScramCredentialsDescription) -> list[tuple[str, int]]:
    return [(c.mechanism, c.iterations) for c in desc.credential_infos]
