"""JSON Schema and Pydantic models as constraints.

>>> import corral
>>> byte_tokens = [bytes([b]) for b in range(256)] + [b"<eos>"]
>>> tok = corral.Tokenizer.from_tokens(byte_tokens, special_ids=[256], eos_ids=[256])
>>> g = corral.compile_json_schema({"type": "object", "properties": {"n": {"type": "integer", "maximum": 9}},
...                                 "required": ["n"]}, tok, whitespace="compact")
>>> m = g.matcher()
>>> m.accept_bytes(b'{"n":7}'), m.is_accepting()
(True, True)
>>> g.matcher().accept_bytes(b'{"n":10}')
False
>>> g.validate('{"n": 7}')
{'n': 7}

A string field marked ``"x-corral-slot": "name"`` takes its allowed values per request: the
schema is compiled once (the skeleton) and each request binds the values in microseconds.

>>> skeleton = corral.compile_json_schema({"type": "object", "properties": {
...     "cc": {"type": "string", "x-corral-slot": "cost_center"}}, "required": ["cc"]}, tok,
...     whitespace="compact")
>>> skeleton.slots
{'cost_center': ['#/properties/cc']}
>>> g = skeleton.bind({"cost_center": ["CC-104", "CC-109"]})
>>> m = g.matcher()
>>> m.accept_bytes(b'{"cc":"CC-1'), m.accept_bytes(b'1"}'), m.accept_bytes(b'09"}'), m.is_accepting()
(True, False, True, True)
>>> g.validate('{"cc": "CC-104"}')
{'cc': 'CC-104'}
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from corral import _native as _core
from corral.engine import CompiledGrammar, _limits, _vocab
from corral.errors import CompileError, OutputValidationError, SchemaError
from corral.grammar.bounded_json import loads
from corral.grammar.json_schema import SLOT_KEYWORD, SchemaOptions, SchemaReport, _NoValue, schema_to_grammar
from corral.tokenizer import Tokenizer

__all__ = ["JsonSchemaGrammar", "OutputValidationError", "compile_json_schema", "schema_grammar"]


class JsonSchemaGrammar(CompiledGrammar):
    """A compiled JSON Schema (or Pydantic model).

    Attributes
    ----------
    schema : dict | bool
        The JSON Schema that was compiled.
    report : SchemaReport
        Which keywords the grammar enforces and which are checked after decoding.
    grammar_source : str
        The generated grammar text (GBNF with regex terminals).
    model : type | None
        The Pydantic model / type given, if any (``parse`` returns its instances).
    slot_values : dict[str, list[str]] | None
        For a binding (see ``bind``): the values bound to each slot; None for a skeleton or a
        schema without slots.
    """

    def __init__(
        self,
        native: Any,
        tokenizer: Tokenizer,
        schema: Any,
        report: SchemaReport,
        source: str,
        model: Any = None,
    ) -> None:
        super().__init__(native, tokenizer, "json_schema")
        self.schema = schema
        self.report = report
        self.grammar_source = source
        self.model = model
        self.slot_values: dict[str, list[str]] | None = None
        self._checker: Any = None

    @property
    def slots(self) -> dict[str, list[str]]:
        """The schema's slots (``x-corral-slot``): name -> JSON pointers of the strings using it."""
        return {k: list(v) for k, v in self.report.slots.items()}

    def bind(self, slots: Mapping[str, Sequence[str]]) -> JsonSchemaGrammar:
        """Bind every ``x-corral-slot`` to its allowed values for one request, e.g.
        ``{"cost_center": ["CC-104", "CC-109"]}``: a grammar whose slot strings are exactly
        those values (as JSON strings in ``json.dumps(v, ensure_ascii=False)`` spelling), built
        without recompiling the schema (see ``CompiledGrammar.bind``). ``validate``/``parse`` of
        the result also check each slot string against its values, as an ``enum`` would."""
        bound = super().bind(slots)
        assert isinstance(bound, JsonSchemaGrammar)
        return bound

    def _derive(self, native: Any, slots: Mapping[str, Sequence[str]]) -> JsonSchemaGrammar:
        if native is self._native:
            return self
        out = JsonSchemaGrammar(
            native, self.tokenizer, self.schema, self.report, self.grammar_source, self.model
        )
        out.skeleton = self
        out.slot_values = {name: list(values) for name, values in slots.items()}
        return out

    def validate(self, output: str | bytes) -> Any:
        """Parse the decoded output and check it against the whole schema (including keywords
        the grammar could not enforce; on a binding, each slot string must be one of its bound
        values). Returns the parsed JSON value.

        Raises
        ------
        OutputValidationError
            The output is not JSON or violates the schema.
        """
        text = output.decode("utf-8") if isinstance(output, bytes) else output
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise OutputValidationError(f"output is not JSON: {e}", [str(e)]) from None
        except RecursionError:
            # The grammar nests exactly (any depth); Python's parser and jsonschema do not.
            raise OutputValidationError(_TOO_DEEP, [_TOO_DEEP]) from None
        if self._checker is None:  # built once per grammar (per binding), on first use
            self._checker = _validator(self.schema, self.slot_values)
        validator = self._checker
        try:
            errors = [
                f"{'/'.join(map(str, e.absolute_path)) or '#'}: {e.message}"
                for e in validator.iter_errors(value)
            ]
        except RecursionError:
            raise OutputValidationError(_TOO_DEEP, [_TOO_DEEP]) from None
        if errors:
            raise OutputValidationError("output violates the schema: " + "; ".join(errors[:3]), errors)
        return value

    def failed_keywords(self, output: str | bytes) -> list[str]:
        """The schema keywords ``output`` violates, sorted (``not_json`` when it does not parse;
        empty when it validates) — what the server's validation-failure metric counts."""
        text = output.decode("utf-8") if isinstance(output, bytes) else output
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return ["not_json"]
        if self._checker is None:
            self._checker = _validator(self.schema, self.slot_values)
        try:
            return sorted({str(e.validator) for e in self._checker.iter_errors(value)})
        except RecursionError:
            return ["max_output_depth"]

    def parse(self, output: str | bytes) -> Any:
        """Validate the output and, when compiled from a Pydantic model/type, return an instance
        of it (``TypeAdapter(model).validate_json``); otherwise the parsed JSON value."""
        value = self.validate(output)
        if self.model is None:
            return value
        from pydantic import TypeAdapter

        text = output.decode("utf-8") if isinstance(output, bytes) else output
        return TypeAdapter(self.model).validate_json(text)


def _validator(schema: Any, slot_values: dict[str, list[str]] | None = None) -> Any:
    """A jsonschema validator for the schema's draft (2020-12 unless ``$schema`` says otherwise),
    with that draft's format checkers, except for the formats the grammar enforces: those are
    checked with the grammar's regexes (corral.grammar.formats; jsonschema's checkers for some
    of them need optional packages, and would judge a few strings otherwise). With `slot_values`, the
    ``x-corral-slot`` keyword checks a string against its slot's values (strings only, like
    ``pattern``; unbound slots constrain nothing)."""
    import jsonschema

    from corral.grammar.formats import FORMAT_REGEXES

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if slot_values:
        allowed = {name: frozenset(values) for name, values in slot_values.items()}

        def slot_check(validator: Any, name: Any, instance: Any, subschema: Any) -> Any:
            values = allowed.get(name) if isinstance(name, str) else None
            if isinstance(instance, str) and values is not None and instance not in values:
                yield jsonschema.ValidationError(
                    f"{instance!r} is not one of the values bound to slot {name!r}"
                )

        cls = jsonschema.validators.extend(cls, {SLOT_KEYWORD: slot_check})
    from corral.grammar.json_schema.literals import _format_checker

    # The formats the grammar enforces are checked with the grammar's own regexes, not skipped:
    # under not/oneOf/if a skipped format would match every string and so flip the verdict.
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = {k: v for k, v in cls.FORMAT_CHECKER.checkers.items() if k not in FORMAT_REGEXES}
    checker.checkers.update(_format_checker().checkers)
    return cls(schema, format_checker=checker)


_TOO_DEEP = "output nests too deeply to be validated in Python (its recursion limit)"


def schema_of(schema: Any, max_depth: int = SchemaOptions.max_schema_depth) -> tuple[Any, Any]:
    """(JSON Schema, model or None) for a dict/bool/JSON text or a Pydantic model/type. JSON
    text nested deeper than `max_depth` raises ``LimitExceeded("max_schema_depth")`` before it
    is parsed."""
    if isinstance(schema, (dict, bool)):
        return schema, None
    if isinstance(schema, (str, bytes)):
        try:
            return loads(schema, max_depth, "max_schema_depth", "the schema text"), None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise SchemaError(f"schema text is not valid JSON: {e}", "#") from None
    try:
        from pydantic import TypeAdapter
    except ImportError:  # pragma: no cover - pydantic is optional
        raise TypeError(f"expected a JSON Schema dict or text, got {type(schema).__name__}") from None
    try:
        return TypeAdapter(schema).json_schema(), schema
    except Exception as e:  # pydantic raises several types for non-model input
        raise TypeError(f"cannot build a JSON Schema from {schema!r}: {e}") from None


def _check_regex(pattern: str) -> None:
    """Raise CompileError (or LimitExceeded) if the engine cannot compile `pattern` (lookaround,
    ...): one engine call that builds the automaton without a vocabulary."""
    _core.check_regex(pattern, {})


def compile_json_schema(
    schema: Any,
    tokenizer: Tokenizer,
    *,
    whitespace: Literal["flexible", "compact", "pretty"] = "flexible",
    max_whitespace: int = 16,
    indent: int = 2,
    extra_properties: Literal["schema", "spec"] = "schema",
    property_order: Literal["schema", "any"] | None = None,
    strict: bool = False,
    escapes: Literal["any", "canonical"] = "any",
    **options_and_limits: Any,
) -> JsonSchemaGrammar:
    """Compile a JSON Schema (dict, bool or JSON text; draft 2020-12, draft-07 spellings
    accepted) or a Pydantic model / ``TypeAdapter``-able type into a constraint.

    Parameters
    ----------
    whitespace : {"flexible", "compact", "pretty"}
        Flexible (default): whitespace between tokens as the model likes, at most
        ``max_whitespace`` characters in a row. Compact: none. Pretty: exactly the layout of
        ``json.dumps(value, indent=indent)``.
    extra_properties : {"schema", "spec"}
        "schema" (default): undeclared properties only where ``additionalProperties`` allows
        them explicitly. "spec": the JSON Schema default (any undeclared property).
    property_order : {"schema", "any"} or None
        "schema": declared properties in the schema's order. "any": in any order, each at most
        once, ``required`` enforced (exact in the mask). None (default): "any" with
        ``extra_properties="spec"``, else "schema".
    strict : bool
        Refuse keywords the grammar cannot enforce instead of checking them after decoding.
    escapes : {"any", "canonical"}
        "any" (default): every JSON spelling of a string. "canonical": only the one
        ``json.dumps(s, ensure_ascii=False)`` writes — one spelling per key and value, so keys
        are forced byte for byte (``corral.generate`` uses it by default).
    **options_and_limits
        The converter's budgets (the other :class:`~corral.grammar.json_schema.SchemaOptions`
        fields: ``max_product_states``, ``max_counted_length``, ``max_convert_ms``, ...) and
        engine limits (see ``corral.DEFAULT_LIMITS``), told apart by name.

    Raises
    ------
    SchemaError, UnsupportedSchemaError, LimitExceeded
    """
    fields = {f.name for f in dataclasses.fields(SchemaOptions)}
    budgets = {k: v for k, v in options_and_limits.items() if k in fields}
    limits = {k: v for k, v in options_and_limits.items() if k not in fields}
    options = SchemaOptions(
        whitespace=whitespace,
        max_whitespace=max_whitespace,
        indent=indent,
        extra_properties=extra_properties,
        property_order=property_order,
        strict=strict,
        escapes=escapes,
        **budgets,
    )
    raw, model = schema_of(schema, options.max_schema_depth)
    text, report = schema_to_grammar(raw, options, check_regex=_check_regex)
    return schema_grammar(raw, text, report, tokenizer, limits, model)


def schema_grammar(
    schema: Any,
    text: str,
    report: SchemaReport,
    tokenizer: Tokenizer,
    limits: Mapping[str, int] | None = None,
    model: Any = None,
) -> JsonSchemaGrammar:
    """The engine's compile of a converted schema (``text``, ``report`` from
    ``schema_to_grammar``): the one place a schema's grammar text reaches the engine."""
    try:
        native = _core.compile_grammar(text, "root", _vocab(tokenizer), _limits(dict(limits or {})))
    except CompileError as e:
        if e.offset is None and e.message.startswith(_EMPTY_LANGUAGE):
            # The converter met the same merged subschema again at the same place (an allOf of
            # oneOfs none of whose pairs a value satisfies) and each way to match refers back
            # to itself: the language is empty, so no value satisfies the schema as converted.
            raise _NoValue("no value satisfies this schema (its grammar matches no string)", "#") from None
        raise
    return JsonSchemaGrammar(native, tokenizer, schema, report, text, model)


# The engine's message for a grammar whose start rule can never complete (grammar_lower.cpp).
_EMPTY_LANGUAGE = "the grammar matches no string at all"
