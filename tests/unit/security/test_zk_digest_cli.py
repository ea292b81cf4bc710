"""Where ``--zookeeper`` commands take the brokers' ZooKeeper digest identity from
(headwater.cli.zk_auth): the flag or ``--command-config`` for the user, the variable or
``--command-config`` for the password (never a flag), and the usage errors (exit 2) that
never show a password."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from headwater.cli import zk_auth
from headwater.cli._common import CliError
from headwater.coordination.zk_security import ZkAuth

ENV = zk_auth.DIGEST_PASSWORD_ENV


def args(user: str | None = None, config: Path | None = None) -> argparse.Namespace:
    return argparse.Namespace(zookeeper_digest_username=user, command_config=config)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "zk.properties"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_user_is_no_identity() -> None:
    assert zk_auth.digest_auth(args(), environ={ENV: "pw"}) is None


def test_flag_and_variable() -> None:
    auth = zk_auth.digest_auth(args("headwater"), environ={ENV: "pw"})
    assert auth == ZkAuth("headwater", "pw", set_acl=True)
    assert "pw" not in repr(auth)


def test_command_config_holds_both(tmp_path: Path) -> None:
    config = write(tmp_path, "zookeeper.digest.username=hw\nzookeeper.digest.password=s3cret\n")
    assert zk_auth.digest_auth(args(config=config), environ={}) == ZkAuth(
        "hw", "s3cret", set_acl=True
    )
    # The flag and the variable win over the file.
    assert zk_auth.digest_auth(args("other", config), environ={ENV: "env-pw"}) == ZkAuth(
        "other", "env-pw", set_acl=True
    )


def test_client_security_keys_of_the_file_are_not_read_here(tmp_path: Path) -> None:
    config = write(tmp_path, "security.protocol=SSL\nssl.truststore.location=/x\n")
    assert zk_auth.digest_auth(args(config=config), environ={}) is None


@pytest.mark.parametrize(
    ("user", "text", "named"),
    [
        ("headwater", "", ENV),
        (None, "zookeeper.digest.username=hw\n", "zookeeper.digest.password"),
        ("a:b", "", "must not contain ':'"),
    ],
    ids=["no-password", "file-user-no-password", "colon"],
)
def test_usage_errors(tmp_path: Path, user: str | None, text: str, named: str) -> None:
    with pytest.raises(CliError) as refused:
        zk_auth.digest_auth(args(user, write(tmp_path, text)), environ={ENV: ""})
    assert refused.value.exit_code == 2
    assert named in str(refused.value)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(CliError) as refused:
        zk_auth.digest_auth(args("hw", tmp_path / "missing"), environ={ENV: "pw"})
    assert refused.value.exit_code == 2 and "--command-config" in str(refused.value)


def test_the_parser_has_no_password_flag() -> None:
    parser = argparse.ArgumentParser()
    zk_auth.add_option(parser)
    flags = [o for a in parser._actions for o in a.option_strings]
    assert "--zookeeper-digest-username" in flags
    assert not [f for f in flags if "password" in f]
