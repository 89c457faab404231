"""Options a JSON Schema conversion takes, and the report it gives back.

In:  keyword arguments from the caller (layout, strictness, escapes, and the frontend budgets).
Out: :class:`SchemaOptions` (frozen, validated on construction) and :class:`SchemaReport` /
     :class:`ReportEntry`, the keyword-by-keyword account of what the grammar enforces and what
     is checked after decoding.

Invariants: an options object that exists is valid (``__post_init__`` raises ``ValueError``
naming the field otherwise); every budget has a default that reproduces the converter's
historical behaviour, and raising or lowering one only moves keywords between "enforced" and
"checked after decoding" (or, for ``max_convert_ms``, makes conversion fail with
``LimitExceeded``) — it never changes what an enforced keyword means. One exception, stated in
the report: ``max_unique_items`` caps the length of a unique array that has no smaller
``maxItems`` (a narrower language, never a wider one).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

Whitespace = Literal["compact", "flexible", "pretty"]

# Inclusive ranges for the integer budgets (name -> (low, high)); high None: unbounded.
_BUDGET_RANGES: dict[str, tuple[int, int | None]] = {
    "max_product_states": (1, None),
    "max_product_states_total": (1, None),
    "max_counted_length": (0, None),
    "max_key_patterns": (0, 12),
    "max_named_keys": (0, None),
    "max_machine_states": (1, None),
    "max_unique_items": (0, 4096),
    "pretty_max_depth": (0, 1024),
    "max_schema_depth": (1, 512),
}


@dataclass(frozen=True)
class SchemaOptions:
    """How JSON is laid out, how strictly the schema is read, and what conversion may cost.

    Attributes
    ----------
    whitespace : {"flexible", "compact", "pretty"}
        ``"flexible"`` (default): the model may put whitespace between tokens as it likes, but
        at most ``max_whitespace`` characters in a row, so a small model cannot loop on spaces
        or newlines. ``"compact"``: no whitespace at all (fewest tokens). ``"pretty"``: the
        layout of ``json.dumps(value, indent=indent)``, exactly, for containers nested up to
        ``pretty_max_depth`` (32) deep. Deeper ones accept whitespace runs of up to
        ``256 * indent + max_whitespace`` characters; values of ``true``/``{}`` schemas and
        object/array ``enum`` values are laid out flexibly.
    indent : int
        Spaces per nesting level in pretty mode (default 2).
    max_whitespace : int
        Longest whitespace run in flexible mode (default 16: enough for pretty-printed JSON a
        few levels deep).
    extra_properties : {"schema", "spec"}
        ``"schema"`` (default, like OpenAI strict mode): properties not declared in
        ``properties`` (or by a ``patternProperties`` pattern) are generated only when
        ``additionalProperties`` explicitly allows them.
        ``"spec"``: follow the JSON Schema default (undeclared properties of any value).
    property_order : {"schema", "any"} or None
        ``"schema"``: declared properties come in the schema's order (what generation wants:
        the model writes them as the schema lists them). ``"any"``: declared properties in any
        order, each at most once, undeclared ones (where allowed) anywhere, ``required`` still
        enforced — what the JSON Schema spec accepts, exact in the mask (a keyed member group:
        the matcher remembers the keys each open object has seen, so the grammar stays linear in
        the number of properties). ``None`` (default): ``"any"`` with
        ``extra_properties="spec"``, else ``"schema"``. Objects whose ``minProperties`` may
        need two or more undeclared properties of a finite key class (``"^z[0-9]$"``), or that
        combine dependencies with both counts over more than 16 properties and no undeclared
        ones, keep schema order (reported as a note).
    strict : bool
        ``True``: a keyword the grammar cannot enforce is an error. ``False`` (default): it is
        checked after decoding and listed in the report; unknown ``format`` names are then plain
        strings (reported).
    escapes : {"any", "canonical"}
        ``"any"`` (default): strings (keys and values) may use every JSON spelling — raw
        characters, ``\\uXXXX``, ``\\/`` — as a validator accepts them. ``"canonical"``: only
        the spelling ``json.dumps(s, ensure_ascii=False)`` writes (raw characters; ``\\"``,
        ``\\\\``, short escapes and ``\\u00xx`` for control characters), so every key and enum
        string has one spelling, which jump-ahead can force byte for byte and a small model
        cannot drift away from (``"a\\u0072guments"``). Generation uses it by default.

    Budgets
    -------
    Past a budget the keyword that needed it is checked after decoding instead (and reported;
    with ``strict=True`` it is an error), except ``max_schema_depth`` and ``max_convert_ms``,
    which stop the conversion.

    max_product_states : int
        Most DFA states one string product automaton may have (``pattern`` & ``format`` &
        length, or a key class of ``propertyNames`` & ``patternProperties`` minus the declared
        names); default 6,000. Each product is built once by a probe (its cost grows with its
        states) and again by the final compile, and its states count against the engine's
        ``max_dfa_states`` (20,000) and the per-state mask cache. Over it: the length, then the
        pattern, is checked after decoding.
    max_product_states_total : int
        Most DFA states all of a schema's string products may have together (default 60,000;
        the engine's ``max_total_dfa_states`` is 200,000). Compile time and mask-cache memory
        grow with this sum.
    max_counted_length : int
        Longest ``minLength``/``maxLength`` (also inside ``propertyNames``) counted exactly by
        the grammar (default 256). Counting multiplies the string automaton by the count (about
        20 states per character for any character, 10 for an ASCII class); at 256 a plain string
        is about 5,000 DFA states. Longer bounds are checked after decoding.
    max_key_patterns : int
        Most ``patternProperties`` patterns (with different schemas) one key may match at once
        (default 4, at most 12). Key classes are the sets of patterns one key can match, found
        by refinement over overlapping patterns (at most 256 classes, each a product automaton
        and a value rule). Past either bound, ``patternProperties`` is checked after decoding.
    max_named_keys : int
        Most names a ``propertyNames`` enum/const may list to become declared optional members
        (default 16), which never repeat. Each name is a member of the object's counting
        machine; with more names, extra keys are one class and may repeat (JSON parsers keep the
        last one).
    max_machine_states : int
        Most rules one counting state machine may write (default 5,000): ``multipleOf``
        automata, object members counted for ``minProperties``/``maxProperties``/dependencies,
        array items counted for ``contains``. Grammar size and Earley work grow with it. Over
        it: the keyword is checked after decoding (for objects, dependencies first, then the
        counts).
    max_unique_items : int
        Most items a ``uniqueItems`` array of free values (strings with at most a
        ``minLength``, integers without an upper bound) may hold while the matcher
        enforces uniqueness (default 256, at most 4,096): the matcher remembers a 24-byte hash
        of each item it closed, and each mask inside such an array replays the tokens that
        could close a repeat. An array whose ``maxItems`` is at most this is enforced exactly.
        One without ``maxItems``, or with a larger one, is enforced *and capped* at
        ``max_unique_items`` items: the mask closes the array there (the report's
        ``uniqueItems`` entry says so), so no valid output past the cap is generated or
        accepted. ``0``: such arrays keep ``uniqueItems`` checked after decoding.
    pretty_max_depth : int
        Container depth up to which ``whitespace="pretty"`` writes the exact indentation
        (default 32). Each depth needs its own copy of every rule below it (the indentation is
        part of the rule), so grammar size grows with depth; deeper containers are laid out
        flexibly.
    max_schema_depth : int
        Deepest nesting the conversion follows (default 128, at most 512): arrays/objects in the
        schema document (checked before anything else reads it, in the JSON text too), and
        subschemas converted inside one another, counting each ``$ref`` hop (a ``$ref`` cycle
        costs nothing: it becomes grammar recursion). The converter recurses per subschema, so
        this bounds its stack; real schemas nest at most 24 deep (jsonschemabench). Over it:
        ``corral.LimitExceeded("max_schema_depth", depth, limit, message)`` naming the line
        and column (text) or the JSON pointer.
    max_convert_ms : int or None
        Wall-clock limit for converting one schema to grammar text, in milliseconds (default
        5,000; ``None``: no limit). Checked at every subschema the conversion visits, so a
        schema whose conversion multiplies (nested ``$ref``/``anyOf`` paths) fails quickly with
        ``corral.LimitExceeded("max_convert_ms", elapsed_ms, limit, message)``, the message
        naming the JSON pointer the conversion had reached.
    """

    whitespace: Whitespace = "flexible"
    max_whitespace: int = 16
    indent: int = 2
    extra_properties: Literal["schema", "spec"] = "schema"
    property_order: Literal["schema", "any"] | None = None
    strict: bool = False
    escapes: Literal["any", "canonical"] = "any"
    max_product_states: int = 6000
    max_product_states_total: int = 60000
    max_counted_length: int = 256
    max_key_patterns: int = 4
    max_named_keys: int = 16
    max_machine_states: int = 5000
    max_unique_items: int = 256
    pretty_max_depth: int = 32
    max_schema_depth: int = 128
    max_convert_ms: int | None = 5000

    def __post_init__(self) -> None:
        if self.whitespace not in ("flexible", "compact", "pretty"):
            raise ValueError(f"whitespace must be 'flexible', 'compact' or 'pretty', got {self.whitespace!r}")
        if not isinstance(self.indent, int) or not 0 <= self.indent <= 16:
            raise ValueError("indent must be an integer in [0, 16]")
        if not isinstance(self.max_whitespace, int) or not 0 <= self.max_whitespace <= 256:
            raise ValueError("max_whitespace must be an integer in [0, 256]")
        if self.extra_properties not in ("schema", "spec"):
            raise ValueError("extra_properties must be 'schema' or 'spec'")
        if self.property_order not in (None, "schema", "any"):
            raise ValueError(f"property_order must be 'schema', 'any' or None, got {self.property_order!r}")
        if self.escapes not in ("any", "canonical"):
            raise ValueError("escapes must be 'any' or 'canonical'")
        for name, (low, high) in _BUDGET_RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
            if high is not None and value > high:
                raise ValueError(f"{name} must be at most {high}, got {value!r}")
        ms = self.max_convert_ms
        if ms is not None and (isinstance(ms, bool) or not isinstance(ms, int) or ms < 1):
            raise ValueError(f"max_convert_ms must be a positive integer (milliseconds) or None, got {ms!r}")

    @property
    def any_order(self) -> bool:
        """Are declared properties accepted in any order (``property_order`` resolved)?"""
        if self.property_order is None:
            return self.extra_properties == "spec"
        return self.property_order == "any"

    @classmethod
    def budget_names(cls) -> tuple[str, ...]:
        """The names of the budget fields (the frontend limits), in declaration order."""
        return tuple(f.name for f in fields(cls) if f.name in _BUDGET_RANGES or f.name == "max_convert_ms")


@dataclass(frozen=True)
class ReportEntry:
    """One keyword of the schema and how it is honoured.

    ``capped_at`` is set on a ``uniqueItems`` entry whose array the mask closes at that many
    items (``SchemaOptions.max_unique_items``) although the schema allows more: stricter than
    the schema, which ``corral lint`` warns about (W210). ``detail`` says the same in words.
    """

    pointer: str
    keyword: str
    status: Literal["enforced", "checked after decoding", "ignored"]
    detail: str = ""
    capped_at: int | None = None


@dataclass
class SchemaReport:
    """What the grammar enforces and what is checked after decoding.

    ``post_checks`` is true when at least one keyword must be validated on the decoded value
    (the compiled object's ``validate`` does that with the ``jsonschema`` package).
    """

    entries: list[ReportEntry] = field(default_factory=list)
    # Slots (``x-corral-slot``): name -> JSON pointers of the string schemas that use it.
    slots: dict[str, list[str]] = field(default_factory=dict)

    @property
    def post_checks(self) -> bool:
        return any(e.status == "checked after decoding" for e in self.entries)

    def enforced(self) -> list[ReportEntry]:
        return [e for e in self.entries if e.status == "enforced"]

    def checked_after(self) -> list[ReportEntry]:
        return [e for e in self.entries if e.status == "checked after decoding"]

    def __str__(self) -> str:
        if not self.entries:
            return "every keyword is enforced by the grammar"
        lines = [
            f"{e.pointer}: {e.keyword}: {e.status}{' (' + e.detail + ')' if e.detail else ''}"
            for e in self.entries
            if e.status != "enforced"
        ]
        lines += [
            f"slot {name!r}: {', '.join(ptrs)} (values bound per request)"
            for name, ptrs in self.slots.items()
        ]
        return "\n".join(lines)
