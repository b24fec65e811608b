"""ssl.principal.mapping.rules: a client certificate's name becomes a principal name as Kafka's
SslPrincipalMapper makes it."""

from __future__ import annotations

import pytest

from odradek.security.ssl_principal import NoMatchingRule, SslPrincipalMapper


def test_default_keeps_the_whole_distinguished_name():
    assert SslPrincipalMapper(None).name("CN=alice,OU=Eng,O=Example") == "CN=alice,OU=Eng,O=Example"
    assert SslPrincipalMapper("DEFAULT").name("CN=alice") == "CN=alice"


def test_the_first_rule_that_applies_gives_the_name_with_its_case_change():
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?)$/$1/L, "
                                "RULE:^CN=([^,]*),O=(.*)$/$1@$2/U, DEFAULT")
    assert mapper.name("CN=Alice,OU=Eng") == "alice"
    assert mapper.name("CN=bob,O=example") == "BOB@EXAMPLE"
    assert mapper.name("O=Example") == "O=Example"  # DEFAULT


def test_a_rule_must_match_the_whole_name():
    mapper = SslPrincipalMapper("RULE:CN=([a-z]+)/$1/")
    assert mapper.name("CN=carol") == "carol"
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=carol,O=x"):
        mapper.name("CN=carol,O=x")


def test_references_to_groups_the_pattern_lacks_are_cut_or_literal_as_in_java():
    # one group: $12 is group 1 then "2"; $0 is the whole match; escaped characters are text
    mapper = SslPrincipalMapper(r"RULE:^CN=([a-z]+)$/$12-$0-\/x/")
    assert mapper.name("CN=dan") == "dan2-CN=dan-/x"
    assert SslPrincipalMapper("RULE:^CN=.*$/$3/").name("CN=eve") == "$3"


@pytest.mark.parametrize(("rules", "message"), [
    ("RULE:abc", "Invalid rule: `RULE:abc`, unmatched substring: `RULE:abc`"),
    ("DEFAULT, RULE:x/y", "Invalid rule: `RULE:x/y`"),
])
def test_a_rule_that_does_not_parse_is_refused_with_kafkas_message(rules, message):
    with pytest.raises(ValueError, match=message.replace("$", r"\$")):
        SslPrincipalMapper(rules)
