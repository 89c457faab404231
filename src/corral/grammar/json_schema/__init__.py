"""JSON Schema → corral grammar text.

In:  a JSON Schema (draft 2020-12; draft-07 spellings ``definitions`` and array-form ``items``
     accepted) as a Python dict, bool or JSON text, and :class:`SchemaOptions`.
Out: grammar text (GBNF plus ``/regex/`` and ``/regex/j`` terminals) whose language is the set
     of JSON texts the schema accepts — for every keyword the grammar enforces — plus a
     :class:`SchemaReport` saying, keyword by keyword, what is enforced by the grammar and what
     is checked after decoding.

Invariants:
* Soundness first: every keyword is either enforced exactly by the grammar, or listed in the
  report as ``checked after decoding`` (the Python API then validates the output with the
  ``jsonschema`` package), or refused. Nothing is silently dropped.
* Keywords apply to whichever type the value turns out to be: ``{"minimum": 1}`` constrains
  numbers only and allows any string.
* Strings are constrained on their *decoded* value: ``pattern``/``format``/lengths are
  compiled with the ``j`` regex flag, which accepts every JSON spelling of the matching text
  (raw characters or escapes) and never a raw control character. Several of them at once are
  one product automaton (the grammar's ``&``), lengths up to ``max_counted_length``; a product
  is probed first (probe.py) and written only within ``max_product_states`` (else the length,
  then the pattern, is checked after decoding).
* Property names: an undeclared key is in one key class per set of ``patternProperties``
  patterns (grouped by schema) it can match at once (its value then satisfies all of their
  schemas, or ``additionalProperties`` for none), found by refinement over pairwise overlaps
  rather than by enumerating subsets, each a product automaton
  ``propertyNames & patterns - overlapping other patterns - declared names``. Declared names get the
  schemas of the patterns they match; those that fail ``propertyNames`` are never generated.
  A ``propertyNames`` enum of at most ``max_named_keys`` names makes them declared members, so
  no key repeats; other extra keys may repeat (not regular), except the ones counted for
  ``minProperties``, whose lengths differ.
* Numbers: fractions and exponents are parsed into floats by validators; bounds are applied
  to what the float comparison sees (numbers.float_safe_bound), so ``1e-400`` is never
  generated under ``exclusiveMinimum: 0``.
* Recursion (``$ref`` cycles) becomes grammar recursion: nesting is exact, not unrolled.
* Counting keywords are state machines written as rules (bounded by ``max_machine_states``,
  else checked after decoding): ``multipleOf`` (multiples.py: integer steps exactly; decimal
  steps generated exactly but re-checked, since validators divide in floating point),
  ``minProperties``/``maxProperties`` and dependencies (containers.ObjectMembers: members in
  schema order, names a dependency mentions become declared properties), ``contains`` with
  ``minContains``/``maxContains`` (containers.ArrayItems: an upper bound needs the complement
  of ``contains``, see composition._complement), and ``if``/``then``/``else`` when "not if" is
  expressible (anyOf of the two cases, see composition._not_if).
* ``not`` and the exclusivity of ``oneOf`` go through complements (composition._complement,
  De Morgan over the keywords): ``not S`` is S's complement as ``anyOf``, and a ``oneOf`` whose
  branches may overlap is ``anyOf`` of each branch minus the others; strings outside a pattern
  use the grammar's ``-``. When a complement cannot be written, the keyword is checked after
  decoding.
* Every budget is a :class:`SchemaOptions` field with its default and cost documented; the
  conversion as a whole is bounded by ``max_convert_ms`` (``LimitExceeded`` naming the pointer).

Modules, in the order a subschema meets them:

- ``options``: :class:`SchemaOptions` (layout, strictness, budgets), :class:`SchemaReport`.
- ``core``: the converter's state, rule naming and memoising, the report, undo, and the
  dispatch ``value_rule`` → ``value_body`` → one body per type.
- ``refs``: ``$ref``/``$anchor`` resolution. ``all_of``: merging ``allOf`` parts.
  ``composition``: ``oneOf`` disjointness, ``if``/``then``/``else``, negation.
- ``literals`` (``enum``/``const``), ``numeric`` (bounds, ``multipleOf``), ``strings``
  (``pattern``, ``format``, lengths, slots), ``arrays``, ``objects`` and ``object_keys``
  (``propertyNames``, ``patternProperties`` key classes).
- ``patterns`` (regex text rewrites), ``keywords`` (keyword tables), ``util`` (small pure
  helpers); ``converter`` composes the areas and holds :func:`schema_to_grammar`.
"""

from __future__ import annotations

from corral.grammar.json_schema.converter import _Converter as _Converter
from corral.grammar.json_schema.converter import schema_to_grammar
from corral.grammar.json_schema.keywords import SLOT_KEYWORD
from corral.grammar.json_schema.options import ReportEntry, SchemaOptions, SchemaReport
from corral.grammar.json_schema.options import Whitespace as Whitespace
from corral.grammar.json_schema.util import _NoValue as _NoValue
from corral.grammar.json_schema.util import _TooBig as _TooBig
from corral.grammar.json_schema.util import iter_keywords

__all__ = [
    "SLOT_KEYWORD",
    "SchemaOptions",
    "SchemaReport",
    "ReportEntry",
    "schema_to_grammar",
    "iter_keywords",
]
