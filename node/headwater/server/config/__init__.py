"""Broker configuration: Kafka's names, read from a properties file, env and flags.

Three modules, one job each:

- :mod:`~headwater.server.config.settings`: the declared keys (names, defaults, docs),
  the values derived from them, and :func:`is_secret`, the one rule for which values
  are never shown;
- :mod:`~headwater.server.config.loading`: a properties file, ``HEADWATER_*`` environment
  variables and ``--override`` flags to a :class:`BrokerConfig`;
- :mod:`~headwater.server.config.validation`: the rules between keys, checked on load.
"""

from headwater.server.config.loading import (
    ENV_PREFIX,
    NOT_BROKER_ENV,
    broker_id_from,
    config_from_properties,
    expand_env,
    load_config,
    parse_properties,
    properties_from_env,
)
from headwater.server.config.settings import (
    DEFAULT_CHROOT,
    SECRET_KEYS,
    BrokerConfig,
    ConfigError,
    Listener,
    is_secret,
)
from headwater.server.config.validation import (
    CONSUMER_ASSIGNORS,
    MIGRATION_POLICIES,
    validate_config,
)

__all__ = [
    "CONSUMER_ASSIGNORS",
    "DEFAULT_CHROOT",
    "ENV_PREFIX",
    "MIGRATION_POLICIES",
    "NOT_BROKER_ENV",
    "SECRET_KEYS",
    "BrokerConfig",
    "ConfigError",
    "Listener",
    "broker_id_from",
    "config_from_properties",
    "expand_env",
    "is_secret",
    "load_config",
    "parse_properties",
    "properties_from_env",
    "validate_config",
]
