"""Memo keys of subschemas: which (subschema, context) pairs the converter treats as one.

In:  a subschema (a dict of the document, or one a merge built) and the converter's context
     (the pretty-printing depth).
Out: ``node_key``: a hashable key, equal for schemas that are the same conjunction of the same
     parts — A ∧ B, B ∧ A and (A ∧ B) ∧ A, through ``allOf`` lists and ``$ref``s — or have the
     same content; None for what is not a dict (or a built dict nested absurdly deep).

Invariants: equal keys mean equal schemas (conjunction is associative, commutative and
idempotent; ``required`` and ``type`` lists are sets), so sharing one rule between them is
exact; unequal keys may still be equal schemas (then the rule is only built twice). A document
object's content key is computed once and interned as a number (the document outlives the
conversion, so an id stands for one object throughout), and so is a built dict's (held in
``built_keys`` with the dict, which is never changed once built): a key's cost follows the
schema's size, not the number of paths that reach it.
"""

from __future__ import annotations

from typing import Any

from corral.errors import SchemaError
from corral.grammar.json_schema.core import ConverterCore
from corral.grammar.json_schema.keywords import _ANNOTATIONS
from corral.grammar.json_schema.util import _constraining

# Parts one key flattens at most (else the schema is keyed by its structure): a chain of
# thousands of `$ref`s with siblings would otherwise be walked again at every link.
_MAX_PARTS = 256


class NodeKeysMixin(ConverterCore):
    def node_key(self, schema: Any) -> Any:
        """The memo key of a dict subschema in the current context (pretty depth), or None.

        A conjunction (a dict with ``allOf``, or a ``$ref`` with sibling keywords) is keyed by
        the *set* of its conjuncts, flattened through nested ``allOf``s and ``$ref``s: A ∧ B,
        B ∧ A and (A ∧ B) ∧ A are one key, however many merge paths build them. Any other dict
        by its content (a document object's content is interned once, by identity), so each
        distinct (subschema, context) pair is converted once."""
        if not isinstance(schema, dict):
            return None
        try:
            if id(schema) in self.document_ids:
                # Flattened as a conjunction at the top only (inside a content key a document
                # object is its interned content): computed once per object. Any other
                # document object is itself (its content may be an enum of 100,000 values,
                # not worth reading before the conversion's own time checks).
                key = self.doc_tops.get(id(schema))
                if key is None:
                    shape = self._is_conjunction(schema)
                    key = self._shape(schema) if shape else ("id", id(schema))
                    self.doc_tops[id(schema)] = key
            else:
                key = self._structure(schema)
        except RecursionError:  # a built dict nested absurdly deep: not memoised by node
            return None
        return (key, self.depth_tag() if self.pretty else "")

    def _structure(self, node: Any) -> Any:
        if isinstance(node, (dict, list)):
            if id(node) not in self.document_ids:
                # A dict or list built by a merge (kept alive in built_keys, so its id stands
                # for it until the conversion ends).
                got = self.built_keys.get(id(node))
                if got is None or got[0] is not node:
                    got = (node, self._shape(node))
                    self.built_keys[id(node)] = got
                return got[1]
            # A document object: its content key, computed once (the document outlives the
            # conversion, so an id stands for one object throughout) and interned as a number,
            # so keys that contain it hash in constant time.
            hit = self.doc_keys.get(id(node))
            if hit is None:
                hit = ("n", self.interned.setdefault(self._shape(node, conj=False), len(self.interned)))
                self.doc_keys[id(node)] = hit
            return hit
        # (type, value): 1, 1.0 and True are different schemas values
        return (type(node).__name__, node if not isinstance(node, float) or node == node else "nan")

    def _shape(self, node: dict[str, Any] | list[Any], conj: bool = True) -> Any:
        if isinstance(node, list):
            return ("list", tuple(self._structure(v) for v in node))
        if conj and self._is_conjunction(node):
            atoms = self.conjuncts(node)
            if atoms is not None:
                return ("conj", atoms)
        return ("dict", tuple(sorted((k, self._keyword_key(k, v)) for k, v in node.items())))

    @staticmethod
    def _is_conjunction(node: dict[str, Any]) -> bool:
        """A dict with ``allOf``, or a ``$ref`` with sibling keywords."""
        return "allOf" in node or (
            "$ref" in node and any(k != "$ref" and k not in _ANNOTATIONS for k in node)
        )

    def _keyword_key(self, keyword: str, value: Any) -> Any:
        # Sets written as lists (a merge lists them in whichever order it met the parts).
        if keyword in ("required", "type") and isinstance(value, (list, str)):
            names = [value] if isinstance(value, str) else value
            if all(isinstance(x, str) for x in names):
                return ("set", frozenset(names))
        return self._structure(value)

    def conjuncts(self, schema: dict[str, Any]) -> frozenset[Any] | None:
        """The keys of the conjuncts of `schema`, flattened through ``allOf`` lists and
        ``$ref``s (true and {} dropped): equal sets, equal schemas. None when a part is
        malformed (then the conversion reports it where it is)."""
        atoms: set[Any] = set()
        seen: set[int] = set()  # conjunction is idempotent: a part reached twice counts once
        stack: list[Any] = [schema]
        while stack:
            part = stack.pop()
            if part is True or part == {}:
                continue
            if not isinstance(part, dict):
                if part is not False:
                    return None
                atoms.add(("false",))
                continue
            if id(part) in seen:
                continue
            seen.add(id(part))
            if len(seen) > _MAX_PARTS:
                return None
            if isinstance(part.get("allOf"), list):
                stack.extend(part["allOf"])
                rest = {k: v for k, v in part.items() if k != "allOf"}
                if _constraining(rest):
                    stack.append(rest)
                continue
            if "$ref" in part:
                try:
                    target, _ = self.resolve_ref(part["$ref"], "#")
                except SchemaError:
                    return None
                stack.append(target)
                rest = {k: v for k, v in part.items() if k != "$ref" and k not in _ANNOTATIONS}
                if rest:
                    stack.append(rest)
                continue
            atoms.add(self._structure(part))
        return frozenset(atoms)
