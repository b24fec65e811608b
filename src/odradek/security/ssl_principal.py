"""``ssl.principal.mapping.rules``: from a client certificate's name to a principal name.

A mutual-TLS client is the principal ``User:<name>`` where ``<name>`` comes from the
distinguished name of its certificate's subject, in RFC 2253 form as Java prints it
("CN=alice,OU=Eng,O=Example": most specific first, no spaces). The rules are tried in order
and the first that applies gives the name (Kafka's ``SslPrincipalMapper``, KIP-371):

- ``DEFAULT`` applies to every name and keeps it whole;
- ``RULE:<pattern>/<replacement>/[L|U]`` applies when the regular expression matches the
  whole name; ``$1`` .. ``$n`` in the replacement are its groups, and ``L`` or ``U`` lowers
  or raises the case of the result. ``/`` and ``\\`` inside the pattern or the replacement
  are escaped with a backslash.

``RULE:^CN=(.*?),OU=(.*?)$/$1/L,DEFAULT`` makes "CN=Alice,OU=Eng" the principal
``User:alice`` and keeps any other name as it is. A name no rule applies to fails the
authentication.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

# One rule, as Kafka's RULE_PATTERN reads it: DEFAULT, or RULE:pattern/replacement/[LU].
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


class NoMatchingRule(Exception):
    """No rule of ``ssl.principal.mapping.rules`` applies to a certificate's name."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        result = self.pattern.sub(self._expand, name)  # Java's String.replaceAll
        return {"L": result.lower(), "U": result.upper()}.get(self.case, result)

    def _expand(self, match: re.Match[str]) -> str:
        """The replacement for one match, read as Java's ``Matcher.appendReplacement`` reads
        it: ``\\c`` is the character c, ``$n`` is group n, taking as many digits as name a
        group the pattern has ($12 with one group is group 1 then "2"); like Kafka, a
        reference to no group at all is literal text."""
        out: list[str] = []
        text, i = self.replacement, 0
        while i < len(text):
            char = text[i]
            if char == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            digits = re.match(r"\$(\d+)", text[i:])
            group = _longest_group(digits[1], self.pattern.groups) if digits else None
            if group is None:
                out.append(char)
                i += 1
                continue
            number, used = group
            out.append(match[number] or "")
            i += 1 + used
        return "".join(out)


def _longest_group(digits: str, groups: int) -> tuple[int, int] | None:
    """(group number, digits used) for the longest prefix of ``digits`` naming a group."""
    for used in range(len(digits), 0, -1):
        if int(digits[:used]) <= groups:
            return int(digits[:used]), used
    return None


class SslPrincipalMapper:
    def __init__(self, rules: str | None) -> None:
        """``rules`` is the value of ``ssl.principal.mapping.rules`` (None: DEFAULT); a rule
        that does not parse raises ValueError with Kafka's message."""
        self._text = rules if rules is not None else "DEFAULT"
        self._rules = [rule for text in _split(self._text) if (rule := _parse(text))]

    def name(self, distinguished_name: str) -> str:
        for rule in self._rules:
            principal_name = rule.apply(distinguished_name)
            if principal_name is not None:
                return principal_name
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {self._text}")


def _split(rules: str) -> list[str]:
    return [match[1] for match in _RULE_SPLITTER.finditer(rules.strip())
            if match.end() > match.start()]


def _parse(text: str) -> _Rule | None:
    match = _RULE_PARSER.match(text)
    if match is None:
        raise ValueError(f"Invalid rule: {text}")
    if match.end() != len(text):
        raise ValueError(f"Invalid rule: `{text}`, unmatched substring: `{text[match.end():]}`")
    if match[1]:
        return _Rule(None)
    if match[2] is not None:
        return _Rule(re.compile(match[2]), match[3], match[4])
    return None  # an empty rule is ignored


def distinguished_name(certificate_der: bytes) -> str:
    """The subject of a DER certificate in RFC 2253 form, as Java's
    ``X500Principal.getName()`` prints it (and so as Kafka's rules see it)."""
    return x509.load_der_x509_certificate(certificate_der).subject.rfc4514_string()
