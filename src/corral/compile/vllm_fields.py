"""vLLM's constraint fields, translated into corral's request arguments: one function every host
calls (the vLLM structured-output backend and logits processor, and ``corral serve``, which
speaks vLLM's dialect too), so a field means the same thing wherever it is sent.

In:  the fields of vLLM's ``StructuredOutputsParams`` (``json``, ``regex``, ``choice``,
     ``grammar``, ``json_object``, ``structural_tag``, ``disable_any_whitespace``,
     ``disable_additional_properties``, ``whitespace_pattern``), as a mapping — a request body's
     ``structured_outputs`` object, or the legacy top-level ``guided_*`` fields
     (:func:`guided_fields` renames those).
Out: the arguments :func:`corral.compile.spec_from_args` reads (``json_schema``, ``regex``,
     ``choices``, ``grammar``, ``json_object``, ``structural_tags`` plus ``schema_options``), or
     None when no constraint field is set.

Nothing is dropped: a field corral cannot follow (a ``whitespace_pattern`` that is not one of
the layouts corral enforces, an unknown key) raises :class:`VLLMFieldError` naming it, which hosts
turn into a 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from corral.errors import LimitExceeded
from corral.grammar import bounded_json

__all__ = [
    "CONSTRAINT_FIELDS",
    "GUIDED_FIELDS",
    "OPTION_FIELDS",
    "VLLMFieldError",
    "constraint_args",
    "guided_fields",
    "whitespace_option",
]

CONSTRAINT_FIELDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
"""The fields of ``StructuredOutputsParams`` that each name a constraint (at most one is set)."""

OPTION_FIELDS = ("disable_any_whitespace", "disable_additional_properties", "whitespace_pattern")
"""The fields that shape a JSON constraint."""

GUIDED_FIELDS = {
    "guided_json": "json",
    "guided_regex": "regex",
    "guided_choice": "choice",
    "guided_grammar": "grammar",
    "guided_json_object": "json_object",
    "guided_structural_tag": "structural_tag",
    "guided_whitespace_pattern": "whitespace_pattern",
}
"""vLLM's older top-level request fields and the ``structured_outputs`` field each became."""

_IGNORABLE = ("guided_decoding_backend", "_backend", "_backend_was_auto")
"""Fields that choose an engine rather than constrain output: corral is the engine."""

_KIND = {
    "json": "json_schema",
    "regex": "regex",
    "choice": "choices",
    "grammar": "grammar",
    "json_object": "json_object",
    "structural_tag": "structural_tags",
}


class VLLMFieldError(ValueError):
    """A vLLM constraint field corral cannot follow; ``field`` names it (as the request spelt it)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def guided_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """The legacy ``guided_*`` fields of a request body under their ``structured_outputs`` names
    (``guided_json`` → ``json``); fields that are None are left out."""
    return {new: body[old] for old, new in GUIDED_FIELDS.items() if body.get(old) is not None}


# A whitespace_pattern is the regex vLLM's outlines backend puts between JSON tokens. corral
# follows one when every output it allows matches it: the pattern must be a class of whitespace
# (or one character) repeated from zero times. A class holding all four of JSON's whitespace
# characters (or ``\s``, which holds more) becomes ``flexible`` with the pattern's bound; a
# narrower class (``[ ]*``: spaces only) becomes ``compact``, since no whitespace at all matches it
# and corral cannot limit flexible runs to some characters. A pattern that requires whitespace
# (``+``, ``{1,3}``) or is anything else is refused.
_WS_ITEM = r"(?:[ \t\n\r]|\\[tnr ]|\\s)"
_WS_PATTERN = re.compile(
    r"(?P<cls>\[" + _WS_ITEM + r"+\]|\\[tnrs ]| |\t|\n|\r)"
    r"(?:(?P<star>\*)|(?P<opt>\?)|(?P<plus>\+)|\{(?P<lo>\d*),\s*(?P<hi>\d*)\}|\{(?P<exact>\d+)\})"
)
_WS_NONE = re.compile(r"(?:|\(\))")
_JSON_WS = frozenset(" \t\n\r")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", " ": " "}


def _ws_chars(cls: str) -> frozenset[str]:
    r"""The characters a whitespace class (as _WS_PATTERN matched it) allows; ``\s`` counts as
    JSON's four (it allows more, which only widens what matches)."""
    body = cls[1:-1] if cls.startswith("[") else cls
    chars: set[str] = set()
    i = 0
    while i < len(body):
        if body[i] == "\\":
            chars |= _JSON_WS if body[i + 1] == "s" else {_ESCAPES[body[i + 1]]}
            i += 2
        else:
            chars.add(body[i])
            i += 1
    return frozenset(chars)


def whitespace_option(pattern: Any, field: str = "whitespace_pattern") -> dict[str, Any]:
    """corral's schema options for a ``whitespace_pattern`` (``{}`` for None): ``compact`` for a
    pattern that allows no whitespace or only some of JSON's whitespace characters,
    ``flexible`` with the pattern's bound (``max_whitespace``) for a class of all four repeated
    from zero. Anything else is refused: corral enforces layouts, not arbitrary separators, and
    a pattern that is not followed must not be ignored."""
    if pattern is None:
        return {}
    if not isinstance(pattern, str):
        raise VLLMFieldError(f"{field} must be a string, got {type(pattern).__name__}", field)
    if _WS_NONE.fullmatch(pattern):
        return {"whitespace": "compact"}
    m = _WS_PATTERN.fullmatch(pattern)
    if m and (m.group("plus") or m.group("lo") not in (None, "", "0") or m.group("exact") not in (None, "0")):
        raise VLLMFieldError(
            f"{field} {pattern!r} requires whitespace; corral can allow whitespace (up to a bound) "
            "but not require it: start the repetition at 0",
            field,
        )
    if m:
        hi: int | None = None  # None: unbounded (*, {0,}); corral keeps its default bound
        if m.group("exact") or m.group("hi"):
            hi = int(m.group("exact") or m.group("hi"))
        elif m.group("opt"):
            hi = 1
        if hi == 0 or not _JSON_WS <= _ws_chars(m.group("cls")):
            return {"whitespace": "compact"}  # matches the pattern: zero repetitions
        options: dict[str, Any] = {"whitespace": "flexible"}
        if hi is not None:
            options["max_whitespace"] = min(hi, 256)  # corral's own cap on a run
        return options
    raise VLLMFieldError(
        f"{field} {pattern!r} is not a layout corral can enforce: use a class of JSON whitespace "
        'repeated from zero (e.g. "[ \\t\\n\\r]*", "[ \\n]{0,4}"), "" for none, or '
        "disable_any_whitespace",
        field,
    )


def _json_text(value: Any, field: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return bounded_json.loads(value, 900, "max_arg_depth", field)
    except LimitExceeded as e:
        raise VLLMFieldError(str(e), field) from None
    except ValueError as e:
        raise VLLMFieldError(f"{field} is not valid JSON text: {e}", field) from None


def constraint_args(
    fields: Mapping[str, Any], where: str = "structured_outputs", names: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """corral's arguments for vLLM's constraint fields (None: no constraint field is set).

    ``where`` prefixes field names in errors (``"structured_outputs"`` gives
    ``structured_outputs.json``); ``names`` maps a field to the name the client used instead
    (``{"json": "guided_json"}``). Raises :class:`VLLMFieldError` for two constraints at once, an
    unknown field, or an option corral cannot follow."""
    names = names or {}

    def name(f: str) -> str:
        return names.get(f) or (f"{where}.{f}" if where else f)

    unknown = sorted(
        k for k in fields if k not in CONSTRAINT_FIELDS and k not in OPTION_FIELDS and k not in _IGNORABLE
    )
    if unknown:
        raise VLLMFieldError(
            f"unknown field(s) {[name(k) for k in unknown]}; a vLLM constraint is one of "
            f"{list(CONSTRAINT_FIELDS)} with optional {list(OPTION_FIELDS)}",
            name(unknown[0]),
        )
    for flag in ("disable_any_whitespace", "disable_additional_properties"):
        if fields.get(flag) is not None and not isinstance(fields[flag], bool):
            raise VLLMFieldError(f"{name(flag)} must be a boolean, got {fields[flag]!r}", name(flag))
    given = [f for f in CONSTRAINT_FIELDS if fields.get(f) is not None and fields.get(f) is not False]
    if len(given) > 1:
        raise VLLMFieldError(
            f"give one constraint, not {' and '.join(name(f) for f in given)}", name(given[1])
        )
    options: dict[str, Any] = {}
    if fields.get("disable_any_whitespace"):
        options["whitespace"] = "compact"
    if fields.get("whitespace_pattern") is not None:
        ws = whitespace_option(fields["whitespace_pattern"], name("whitespace_pattern"))
        if options and ws.get("whitespace") != "compact":
            raise VLLMFieldError(
                f"{name('disable_any_whitespace')} and {name('whitespace_pattern')} disagree",
                name("whitespace_pattern"),
            )
        options.update(ws)
    if fields.get("disable_additional_properties"):
        # What corral does by default (undeclared properties only where additionalProperties
        # allows them): said explicitly, so the request means the same under any default.
        options["extra_properties"] = "schema"
    if not given:
        if options:
            opts = [name(f) for f in OPTION_FIELDS if fields.get(f) not in (None, False)]
            raise VLLMFieldError(f"{', '.join(opts)} given without a constraint", opts[0])
        return None
    field = given[0]
    value = fields[field]
    if field == "json":
        value = _json_text(value, name(field))
    elif field == "structural_tag":
        value = _json_text(value, name(field))
    elif field == "choice":
        if isinstance(value, str):
            value = _json_text(value, name(field)) if value.lstrip().startswith("[") else [value]
    elif field == "json_object":
        if value is not True:
            raise VLLMFieldError(f"{name(field)} must be true when given, got {value!r}", name(field))
    args: dict[str, Any] = {_KIND[field]: value}
    if options:
        if field not in ("json", "json_object", "structural_tag"):
            opts = [name(f) for f in OPTION_FIELDS if fields.get(f) not in (None, False)]
            raise VLLMFieldError(
                f"{', '.join(opts)} shape JSON output and do not apply to {name(field)}", opts[0]
            )
        args["schema_options"] = options
    return args
