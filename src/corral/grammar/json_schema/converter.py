"""The JSON Schema converter, composed from its areas, and its entry point.

In:  a JSON Schema (dict, bool, or JSON text), :class:`SchemaOptions`, an optional
     ``check_regex`` callback.
Out: ``schema_to_grammar`` returns (grammar text, :class:`SchemaReport`).

Invariants: one ``_Converter`` per call (no state is shared between conversions except the
probe memo in corral.grammar.probe, which depends only on its arguments); the class adds no
behaviour of its own — each method lives in the area module named in core.ConverterCore.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from corral.errors import SchemaError
from corral.grammar.json_schema.all_of import AllOfMixin
from corral.grammar.json_schema.arrays import ArraysMixin
from corral.grammar.json_schema.composition import CompositionMixin
from corral.grammar.json_schema.literals import LiteralsMixin
from corral.grammar.json_schema.numeric import NumbersMixin
from corral.grammar.json_schema.object_keys import ObjectKeysMixin
from corral.grammar.json_schema.objects import ObjectsMixin
from corral.grammar.json_schema.options import SchemaOptions, SchemaReport
from corral.grammar.json_schema.refs import RefsMixin
from corral.grammar.json_schema.strings import StringsMixin


class _Converter(
    ObjectsMixin,
    ObjectKeysMixin,
    ArraysMixin,
    StringsMixin,
    NumbersMixin,
    LiteralsMixin,
    CompositionMixin,
    AllOfMixin,
    RefsMixin,
):
    """One conversion: core.ConverterCore's state and dispatch plus every area's methods."""


def schema_to_grammar(
    schema: Any, options: SchemaOptions | None = None, check_regex: Callable[[str], None] | None = None
) -> tuple[str, SchemaReport]:
    """Convert a JSON Schema (dict, bool or JSON text) to grammar text and a report.

    Raises
    ------
    corral.SchemaError
        Malformed or contradictory schema (the message names the JSON pointer).
    corral.UnsupportedSchemaError
        A construct corral cannot honour (remote ``$ref``; a ``pattern`` using lookaround or
        backreferences; any post-decoding keyword in strict mode).
    corral.LimitExceeded
        The conversion ran past ``options.max_convert_ms`` (``limit == "max_convert_ms"``; the
        message names the JSON pointer it had reached).

    `check_regex`, when given, is called with each pattern regex and raises CompileError for
    one the engine cannot compile, so the error can name the schema keyword.
    """
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaError(f"schema is not valid JSON: {e}", "#") from None
    conv = _Converter(schema, options or SchemaOptions(), check_regex)
    text = conv.convert()
    return text, conv.report
