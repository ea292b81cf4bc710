"""Kafka's ``ssl.principal.mapping.rules``: a client certificate's subject to a user name.

On an SSL listener that requires client certificates, Kafka's principal is
``User:<name>``, where ``<name>`` is the certificate's distinguished name (RFC 2253,
``CN=alice,OU=eng,O=acme``) passed through the rules, in order:

- ``RULE:pattern/replacement/`` applies when ``pattern`` matches the whole name; the
  result is the name with every match of ``pattern`` replaced (Java's ``replaceAll``,
  ``$1`` naming a group); a trailing ``L`` or ``U`` lower- or upper-cases it;
- ``DEFAULT`` gives the distinguished name unchanged.

The first rule that applies wins; a name no rule applies to is refused (Kafka's
``NoMatchingRule``), so the client cannot authenticate.  Rules are separated by commas
or new lines; ``\\/`` and ``\\,`` escape a slash or a comma inside a pattern.  The
default setting is ``DEFAULT``.

Pure: parsing returns a :class:`PrincipalMapper` or raises ``ValueError`` naming the
bad rule; mapping is a function of the name.
"""

from __future__ import annotations

import dataclasses
import functools
import re

_RULE = re.compile(
    r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/(?P<replacement>(?:\\.|[^\\/])*)/(?P<case>[LU]?))\s*(?:[,\n]|$)"
)


class NoMatchingRuleError(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a certificate's subject."""


@dataclasses.dataclass(frozen=True, slots=True)
class MappingRule:
    """One rule; ``pattern is None`` for ``DEFAULT``."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    case: str = ""

    def apply(self, distinguished_name: str) -> str | None:
        """The mapped name, or None when the rule does not apply to ``distinguished_name``."""
        if self.pattern is None:
            return distinguished_name
        if self.pattern.fullmatch(distinguished_name) is None:
            return None
        result = self.pattern.sub(self.replacement, distinguished_name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


@dataclasses.dataclass(frozen=True)
class PrincipalMapper:
    """The parsed rules, in order.  Invariant: at least one rule."""

    rules: tuple[MappingRule, ...]

    def name_for(self, distinguished_name: str) -> str:
        """The principal name for a subject; NoMatchingRuleError when no rule applies."""
        return _name_for(self, distinguished_name)


@functools.lru_cache(maxsize=1024)
def _name_for(mapper: PrincipalMapper, distinguished_name: str) -> str:
    for rule in mapper.rules:
        name = rule.apply(distinguished_name)
        if name is not None and name:
            return name
    raise NoMatchingRuleError(
        f"no rule of ssl.principal.mapping.rules applies to the subject {distinguished_name!r}"
    )


def _java_replacement(text: str) -> str:
    r"""Java's ``replaceAll`` replacement (``$1``, ``\$``) in Python's ``re.sub`` form."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1].replace("\\", "\\\\"))
            i += 2
        elif ch == "$":
            match = re.match(r"\$(\d+)|\$\{(\w+)\}", text[i:])
            if match is None:
                raise ValueError(f"illegal group reference in replacement {text!r}")
            out.append(f"\\g<{match.group(1) or match.group(2)}>")
            i += match.end()
        else:
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
    return "".join(out)


def _unescape_pattern(text: str) -> str:
    """``\\/`` and ``\\,`` are literal; every other escape stays a regex escape."""
    return re.sub(r"\\([/,])", r"\1", text)


def _check_groups(pattern: re.Pattern[str], replacement: str) -> None:
    for ref in re.findall(r"\\g<(\w+)>", replacement):
        known = int(ref) <= pattern.groups if ref.isdigit() else ref in pattern.groupindex
        if not known:
            raise ValueError(f"the pattern has no group {ref}")


def parse_rules(text: str) -> PrincipalMapper:
    """Parse ``ssl.principal.mapping.rules``; ValueError names the rule that is wrong."""
    if not text.strip():
        return DEFAULT_MAPPER
    rules: list[MappingRule] = []
    position = 0
    while position < len(text):
        if not text[position:].strip(" \t\n,"):
            break
        match = _RULE.match(text, position)
        if match is None or match.end() == position:
            rest = text[position:].strip().split("\n")[0]
            raise ValueError(
                f"ssl.principal.mapping.rules: invalid rule {rest!r}; expected "
                "DEFAULT or RULE:pattern/replacement/[LU]"
            )
        position = match.end()
        if match.group("default"):
            rules.append(MappingRule(None))
            continue
        try:
            pattern = re.compile(_unescape_pattern(match.group("pattern")))
            replacement = _java_replacement(match.group("replacement"))
            _check_groups(pattern, replacement)
        except (re.error, IndexError, ValueError) as exc:
            raise ValueError(
                f"ssl.principal.mapping.rules: invalid rule {match.group(0).strip()!r}: {exc}"
            ) from None
        rules.append(MappingRule(pattern, replacement, match.group("case")))
    if not rules:
        return DEFAULT_MAPPER
    return PrincipalMapper(tuple(rules))


DEFAULT_MAPPER = PrincipalMapper((MappingRule(None),))
