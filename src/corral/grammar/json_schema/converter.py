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

from corral.errors import LimitExceeded, SchemaError
from corral.grammar.bounded_json import loads
from corral.grammar.json_schema.all_of import AllOfMixin
from corral.grammar.json_schema.arrays import ArraysMixin
from corral.grammar.json_schema.composition import CompositionMixin
from corral.grammar.json_schema.literals import LiteralsMixin
from corral.grammar.json_schema.node_keys import NodeKeysMixin
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
    NodeKeysMixin,
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
        The schema nests deeper than ``options.max_schema_depth`` (``limit ==
        "max_schema_depth"``), or the conversion ran past ``options.max_convert_ms`` (``limit ==
        "max_convert_ms"``); the message names the JSON pointer (or text position) it reached.

    `check_regex`, when given, is called with each pattern regex and raises CompileError for
    one the engine cannot compile, so the error can name the schema keyword.
    """
    options = options or SchemaOptions()
    if isinstance(schema, (str, bytes)):
        try:
            schema = loads(schema, options.max_schema_depth, "max_schema_depth", "the schema text")
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise SchemaError(f"schema is not valid JSON: {e}", "#") from None
    conv = _Converter(schema, options, check_regex)
    try:
        text = conv.convert()
    except RecursionError:
        # A backstop: max_schema_depth bounds every recursion, but the caller's own stack may
        # already be deep (or a host raised max_schema_depth near Python's limit).
        raise LimitExceeded(
            "max_schema_depth",
            conv.deepest,
            options.max_schema_depth,
            f"the schema nests too deeply to convert on this stack ({conv.deepest} subschemas deep; "
            f"max_schema_depth={options.max_schema_depth})",
        ) from None
    return text, conv.report
