"""The ZooKeeper identity of the commands that write ZooKeeper directly (``--zookeeper``).

On a cluster whose brokers run with ``zookeeper.set.acl=true`` every znode is writable
by the brokers' digest identity alone, and credentials and ACLs are readable by it alone,
so ``headwater users|acls ... --zookeeper`` must present the same identity (Kafka's tools
present the brokers' JAAS login).  Where it comes from, the first found winning:

* the user: ``--zookeeper-digest-username USER``, else ``zookeeper.digest.username`` in
  the ``--command-config FILE`` (Kafka's client-properties file, so one file holds a
  tool's whole identity);
* the password: the variable ``HEADWATER_ZOOKEEPER_DIGEST_PASSWORD`` (also the broker's
  own name for ``zookeeper.digest.password``: in a broker pod of the Helm chart it is
  already set), else ``zookeeper.digest.password`` in the ``--command-config`` file.
  Never from the command line, where ``ps`` and shell histories would show it.

With an identity the command also creates its znodes with Kafka's ACLs (a first user
written before any broker runs is then as protected as the brokers' own znodes).
Other keys of the file are not looked at here: through a broker it holds the client
security that :func:`headwater.cli.topics.security_for` reads.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from headwater.cli._common import CliError
from headwater.coordination.zk_security import ZkAuth
from headwater.server.config import parse_properties

DIGEST_PASSWORD_ENV = "HEADWATER_ZOOKEEPER_DIGEST_PASSWORD"
USERNAME_KEY = "zookeeper.digest.username"
PASSWORD_KEY = "zookeeper.digest.password"
HOW = (
    f"give the brokers' identity with --zookeeper-digest-username and ${DIGEST_PASSWORD_ENV} "
    f"(or {USERNAME_KEY} and {PASSWORD_KEY} in --command-config)"
)
"""The fix, named in every refusal."""


def add_option(parser: argparse.ArgumentParser) -> None:
    """``--zookeeper-digest-username`` (the parser already has ``--command-config``)."""
    parser.add_argument(
        "--zookeeper-digest-username",
        metavar="USER",
        help="with --zookeeper on a zookeeper.set.acl cluster: the brokers' digest identity; "
        f"the password is read from ${DIGEST_PASSWORD_ENV} or {PASSWORD_KEY} in --command-config",
    )


def _file_properties(args: argparse.Namespace) -> dict[str, str]:
    path: Path | None = getattr(args, "command_config", None)
    if path is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"--command-config {path}: {exc.strerror or exc}", exit_code=2) from None
    try:
        return parse_properties(text)
    except ValueError as exc:
        raise CliError(f"--command-config {path}: {exc}", exit_code=2) from None


def digest_auth(
    args: argparse.Namespace, *, environ: Mapping[str, str] | None = None
) -> ZkAuth | None:
    """The identity of a ``--zookeeper`` command, or None without a user name.

    A user name without a password, or a ``:`` in the user name (ZooKeeper's separator),
    is a usage error (exit 2); the message never holds the password.
    """
    env = os.environ if environ is None else environ
    props = _file_properties(args)
    user = (getattr(args, "zookeeper_digest_username", None) or props.get(USERNAME_KEY, "")).strip()
    if not user:
        return None
    if ":" in user:
        raise CliError(f"the ZooKeeper digest user {user!r} must not contain ':'", exit_code=2)
    password = env.get(DIGEST_PASSWORD_ENV) or props.get(PASSWORD_KEY, "")
    if not password:
        raise CliError(
            f"ZooKeeper digest user {user!r} needs a password: ${DIGEST_PASSWORD_ENV} "
            f"or {PASSWORD_KEY} in --command-config",
            exit_code=2,
        )
    return ZkAuth(user, password, set_acl=True)
