"""One constraint, whatever form the user gave it: JSON Schema / Pydantic model, JSON mode,
regex, grammar or a list of choices — compiled for a tokenizer, with the matching parser.

Shared by :func:`corral.generate`, the CLI and the server so every entry point accepts the same
forms and reports the same errors. Compiled constraints are cached per (constraint, tokenizer).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from corral.engine import CompiledGrammar, compile_grammar, compile_regex
from corral.schema import JsonSchemaGrammar, OutputValidationError, compile_json_schema
from corral.tokenizer import Tokenizer

__all__ = ["Constraint", "clear_cache", "make_constraint", "choices_regex", "validate_choices"]


@dataclass(frozen=True)
class Constraint:
    """A compiled constraint plus how to read its output.

    Attributes
    ----------
    kind : str
        "json_schema", "json", "regex", "grammar" or "choices".
    grammar : CompiledGrammar
        What the matchers run.
    choices : tuple of str or None
        The allowed strings, for "choices".
    """

    kind: str
    grammar: CompiledGrammar
    choices: tuple[str, ...] | None = None

    def parse(self, text: str) -> Any:
        """The output as a value: a Pydantic instance or JSON value (schemas, after checking
        the keywords the grammar leaves to validation), a JSON value (JSON mode), or the text.

        Raises :class:`corral.OutputValidationError` when the text does not validate (possible
        only for keywords listed as checked after decoding, or output cut by a budget of 0).
        """
        if isinstance(self.grammar, JsonSchemaGrammar):
            return self.grammar.parse(text)
        if self.kind == "json":
            try:
                return json.loads(text)
            except ValueError as e:
                raise OutputValidationError(f"output is not JSON: {e}", [str(e)]) from None
        return text


def validate_choices(choices: Sequence[str], what: str = "choice") -> None:
    """Check a closed set of strings: a non-empty list of distinct, non-empty strings."""
    if isinstance(choices, str) or not isinstance(choices, Sequence):
        raise TypeError(f"{what}s must be a list of strings")
    if not choices:
        raise ValueError(f"the {what} set is empty: give at least one")
    seen: set[str] = set()
    for i, c in enumerate(choices):
        if not isinstance(c, str):
            raise TypeError(f"{what} {i} is {type(c).__name__}, not a string")
        if not c:
            raise ValueError(f"{what} {i} is the empty string")
        if c in seen:
            raise ValueError(f"{what} {c!r} is listed twice")
        seen.add(c)


def choices_regex(choices: Sequence[str]) -> str:
    """A regex matching exactly one of ``choices`` (validated: non-empty, distinct strings)."""
    validate_choices(choices)
    return "|".join(re.escape(c) for c in choices)


_CACHE: OrderedDict[tuple[str, str, str], Constraint] = OrderedDict()
_CACHE_SIZE = 64


def clear_cache() -> None:
    """Forget every cached compiled constraint (benchmarks; memory)."""
    _CACHE.clear()


def make_constraint(
    tokenizer: Tokenizer,
    *,
    schema: Any = None,
    regex: str | None = None,
    grammar: str | None = None,
    choices: Sequence[str] | None = None,
    json_mode: bool = False,
    schema_options: dict[str, Any] | None = None,
) -> Constraint | None:
    """Compile the one constraint given (None when none is: free generation).

    ``schema`` is a JSON Schema (dict or JSON text) or a Pydantic model / type;
    ``schema_options`` are passed to :func:`corral.compile_json_schema`. A ``CompiledGrammar``
    may be passed as ``grammar`` to reuse one compiled earlier.
    """
    given = [
        name
        for name, v in (("schema", schema), ("regex", regex), ("grammar", grammar), ("choices", choices))
        if v is not None
    ] + (["json_mode"] if json_mode else [])
    if len(given) > 1:
        raise ValueError(f"give one constraint, not {' and '.join(given)}")
    if not given:
        return None
    if isinstance(grammar, CompiledGrammar):
        kind = "json_schema" if isinstance(grammar, JsonSchemaGrammar) else grammar.source
        return Constraint(kind if kind != "json" else "json", grammar)
    key = _key(given[0], schema, regex, grammar, choices, schema_options)
    cache_key = (given[0], key, tokenizer.hash) if key is not None else None
    if cache_key is not None and cache_key in _CACHE:
        _CACHE.move_to_end(cache_key)
        return _CACHE[cache_key]
    if schema is not None:
        c = Constraint("json_schema", compile_json_schema(schema, tokenizer, **(schema_options or {})))
    elif regex is not None:
        c = Constraint("regex", compile_regex(regex, tokenizer))
    elif grammar is not None:
        c = Constraint("grammar", compile_grammar(grammar, tokenizer))
    elif choices is not None:
        c = Constraint("choices", compile_regex(choices_regex(choices), tokenizer), tuple(choices))
    else:
        # Any JSON value, through the schema compiler so the whitespace options apply.
        c = Constraint("json", compile_json_schema({}, tokenizer, **(schema_options or {})))
    if cache_key is not None:
        _CACHE[cache_key] = c
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return c


def _key(kind: str, schema: Any, regex: Any, grammar: Any, choices: Any, options: Any) -> str | None:
    """A content key for the compile cache; None for inputs that are not plain data (a Pydantic
    model class is cached by the schema it produces only via compile_json_schema)."""
    try:
        if kind in ("schema", "json_mode"):
            if not isinstance(schema, (dict, str, bool)):
                return None
            return json.dumps([schema, options], sort_keys=True, default=str)
        return json.dumps([regex, grammar, list(choices) if choices is not None else None])
    except (TypeError, ValueError):
        return None
