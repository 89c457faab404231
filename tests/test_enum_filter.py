"""The enum/const filter (grammar/json_schema/literals.py) that drops enum values the keywords
beside them exclude: it asks `jsonschema`, and must not lean on its deprecated API."""

from __future__ import annotations

import warnings

import pytest

from corral.errors import SchemaError
from corral.grammar.json_schema.literals import _quick_check


def test_values_the_keywords_beside_exclude_are_dropped() -> None:
    assert _quick_check({"maximum": 5}, 4) is True
    assert _quick_check({"maximum": 5}, 9) is False
    assert _quick_check({"type": "string", "pattern": "^a"}, "abc") is True
    assert _quick_check({"type": "string", "pattern": "^a"}, "bcd") is False


def test_an_unresolvable_ref_keeps_the_value_without_a_deprecation_warning() -> None:
    # The filter sees a sub-schema without its root's $defs: the grammar decides such values.
    # jsonschema >= 4.18 deprecates RefResolutionError; catching it warned on every such schema.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _quick_check({"$ref": "#/$defs/missing", "maximum": 5}, 9) is True


def test_a_malformed_keyword_beside_an_enum_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="malformed"):
        _quick_check({"minimum": "x"}, 3)
