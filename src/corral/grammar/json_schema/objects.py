"""Objects: declared members, ``required``, ``additionalProperties``, the counts
``minProperties``/``maxProperties``, and dependencies (``dependentRequired``,
``dependentSchemas`` that only require names, draft-07 ``dependencies``).

In:  a schema's object keywords (``propertyNames``/``patternProperties`` are read with
     object_keys.py).
Out: the grammar of the object: declared members in schema order, each optional unless
     required, plus the extra-key classes, as a counting machine (containers.ObjectMembers,
     capped at ``SchemaOptions.max_machine_states``) when counts or dependencies need one.

With ``property_order="any"`` (SchemaOptions.any_order) an object is instead one keyed member
group (``%keyed``, cpp/keyed.hpp): declared members in any order, each at most once, required
ones, dependencies and the counts enforced by the matcher's seen-key set (and its count of
undeclared members; where ``minProperties`` may need two of those, their keys too:
``%key(...)``). It keeps schema order where that set cannot be exact (keyed_refusal): such a
``minProperties`` when some key class is finite (the group could hold all of its keys),
dependencies beside binding ``minProperties`` and
``maxProperties`` on an object of more than 16 properties that allows no undeclared ones,
``maxProperties: 0``.

Invariants: in schema order, members are generated in schema order, so two schemas differing
only in property order give different grammars. A declared name matching ``patternProperties`` gets those
schemas too; names ``propertyNames`` rejects are never generated; names a dependency mentions
become declared (optional) members so their presence is tracked; an extra key is never a second
copy of a declared name. Over the state budget the machine drops a dimension (dependencies
first, then counts), which is then checked after decoding. An object nothing satisfies raises
``_NoValue``.
"""

from __future__ import annotations

import re
from typing import Any

from corral.errors import SchemaError
from corral.grammar.containers import FIRST, NONEMPTY, Member, ObjectMembers, TooManyStates
from corral.grammar.json_schema.core import ConverterCore
from corral.grammar.json_schema.keywords import _ANNOTATIONS
from corral.grammar.json_schema.patterns import _not_in_branches, _safe_search
from corral.grammar.json_schema.util import _count, _NoValue, _ptr

# Most declared properties of an any-order object with dependencies, a binding maxProperties
# and a binding minProperties but no undeclared properties (cpp/keyed.hpp kMaxFitKeys).
_MAX_FIT_KEYS = 16
# Most values a group remembers (cpp/distinct.hpp kMaxDistinctItems): a key class counted
# above it has, for the engine, infinitely many keys.
_MAX_REMEMBERED = 4096


def _closed_set_fits(n: int, deps: dict[int, set[int]], required: set[int], lo: int, hi: int) -> bool:
    """Is there a set of the n properties that holds the required ones and every dependency of
    each of its own, with between lo and hi of them? (A search over the dependency-closed sets
    reachable from the required ones, at most 2**n with n <= _MAX_FIT_KEYS.)"""
    closure = []
    for j in range(n):
        c, todo = {j}, [j]
        while todo:
            for d in deps.get(todo.pop(), ()):
                if d not in c:
                    c.add(d)
                    todo.append(d)
        closure.append(sum(1 << k for k in c))
    start = 0
    for r in required:
        start |= closure[r]
    seen, todo = {start}, [start]
    while todo:
        t = todo.pop()
        size = t.bit_count()
        if lo <= size <= hi:
            return True
        for j in range(n):
            grown = t | closure[j]
            if grown != t and grown.bit_count() <= hi and grown not in seen:
                seen.add(grown)
                todo.append(grown)
    return False


class ObjectsMixin(ConverterCore):
    def object_body(self, schema: dict[str, Any], pointer: str) -> str:
        ws = self.ws
        opening, sep, closing, colon = self.layout()
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", _ptr(pointer, "properties"))
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise SchemaError("required must be an array of strings", _ptr(pointer, "required"))
        lo = _count(schema, "minProperties", pointer, 0) or 0
        hi = _count(schema, "maxProperties", pointer, None)
        if hi is not None and lo > hi:
            raise SchemaError(f"minProperties {lo} > maxProperties {hi}", _ptr(pointer, "minProperties"))
        addl = schema.get("additionalProperties", None)
        if addl is None:
            addl = True if self.opt.extra_properties == "spec" else False
            if addl is False and lo > len([n for n, s in props.items() if s is not False] + required):
                # Only undeclared properties can reach minProperties: generate them (as the spec
                # default allows) rather than nothing.
                addl = True
                self.note(
                    _ptr(pointer, "minProperties"),
                    "minProperties",
                    "enforced",
                    "additionalProperties is not set: undeclared properties are generated to reach it",
                )
        pattern_props = schema.get("patternProperties")
        if not isinstance(pattern_props, dict):
            pattern_props = {}
        keys = self.key_language(schema, pointer)

        def undeclared_schema(name: str) -> Any:
            """The schema an undeclared property `name` gets (patternProperties, else
            additionalProperties)."""
            matching = [sub for pat, sub in pattern_props.items() if _safe_search(pat, name)]
            if matching:
                return matching[0] if len(matching) == 1 else {"allOf": matching}
            return addl

        # A declared property whose name matches patterns must satisfy those schemas too.
        value_at = {name: _ptr(pointer, "properties", name) for name in props}
        for name, sub in list(props.items()) if pattern_props else ():
            matching = [p for pat, p in pattern_props.items() if _safe_search(pat, name)]
            if matching and sub is not False:
                props = {**props, name: {"allOf": [sub, *matching]}}
                value_at[name] += "&patternProperties"
        for r in required if pattern_props else ():
            matching = [sub for pat, sub in pattern_props.items() if _safe_search(pat, r)]
            if r not in props and matching:
                # Allowed by patternProperties: generate it with those schemas.
                props = {**props, r: undeclared_schema(r)}
        for r in required:
            if r not in props and addl is False:
                if "additionalProperties" in schema:
                    raise _NoValue(
                        f"required property {r!r} is forbidden by additionalProperties: false",
                        _ptr(pointer, "required"),
                    )
                props = {**props, r: True}
        # Required properties that are not declared are generated with the extra-property schema.
        for r in required:
            if r not in props:
                props = {**props, r: addl}
        # Dependencies: names they mention become declared (optional) properties, so their
        # presence is tracked; targets before their keys, the usual order in instances.
        deps, never, dep_keywords = self.dependency_map(schema, pointer)
        for key, targets in deps.items():
            for name in [*targets, key] if targets else []:
                if name in props:
                    continue
                if addl is not False or pattern_props:
                    sub = undeclared_schema(name)
                elif name != key and "additionalProperties" not in schema:
                    sub = True  # a target, generated as required undeclared names are
                else:
                    continue  # can never be present
                props = {**props, name: sub}
        for name in never:
            if name not in props and (addl is not False or pattern_props):
                props = {**props, name: False}  # keep it out of the extra keys
        if keys is not None and "propertyNames" in schema:  # (else every name passes)
            # propertyNames: names that fail it are never generated.
            for name in list(props):
                if not keys.test(name) and props[name] is not False:
                    if name in required:
                        raise _NoValue(
                            f"required property {name!r} fails propertyNames", _ptr(pointer, "required")
                        )
                    props = {**props, name: False}
            if keys.names is not None:
                # A small finite set of allowed names: each becomes a declared (optional) member,
                # so no extra key can repeat.
                for name in keys.names:
                    if name not in props:
                        props = {**props, name: undeclared_schema(name)}
        names = list(props)
        generated: list[tuple[str, str, bool]] = []  # (name, member text, required)
        for name in names:
            sub = props[name]
            is_req = name in required
            if sub is False:
                if is_req:
                    raise SchemaError(
                        f"required property {name!r} has schema false", _ptr(pointer, "properties", name)
                    )
                continue
            try:
                at = value_at[name] if name in value_at else _ptr(pointer, "properties", name)
                value = self.child_rule(sub, at)
            except _NoValue as e:
                if is_req:
                    raise
                self.note(
                    _ptr(pointer, "properties", name),
                    "properties",
                    "enforced",
                    f"never generated: {e.message}",
                )
                continue
            generated.append((name, f"{self.jstr(re.escape(name))} {colon} {value}", is_req))
        extra, distinct, key_parts = self.extra_members(
            schema, pointer, addl, pattern_props, keys, names, colon
        )
        # A key whose dependency can never be present can never be present itself.
        present = {name for name, _, _ in generated}
        changed = True
        while changed:
            changed = False
            for key, targets in deps.items():
                if (
                    key in present
                    and key not in never
                    and any(t not in present or t in never for t in targets)
                ):
                    never.add(key)
                    changed = True
        for name, _, is_req in generated:
            if is_req and name in never:
                raise _NoValue(
                    f"required property {name!r} has a dependency that can never be met",
                    _ptr(pointer, "required"),
                )
        members = [(name, text, is_req) for name, text, is_req in generated if name not in never]
        index = {name: i for i, (name, _, _) in enumerate(members)}
        dep_index = {
            index[key]: {index[t] for t in targets}
            for key, targets in deps.items()
            if key in index and targets
        }
        # A required property's dependencies are required too (every valid instance has them).
        closure = [i for i, (_, _, r) in enumerate(members) if r]
        in_closure = set(closure)  # (a list's `in` made this quadratic in the required names)
        for i in closure:
            for t in sorted(dep_index.get(i, ())):
                if t not in in_closure:
                    closure.append(t)
                    in_closure.add(t)
        members = [(name, text, is_req or i in in_closure) for i, (name, text, is_req) in enumerate(members)]
        n_required = sum(1 for _, _, r in members if r)
        if hi is not None and n_required > hi:
            raise _NoValue(
                f"{n_required} required properties but maxProperties is {hi}", _ptr(pointer, "maxProperties")
            )
        if extra is None and lo > len(members):
            raise _NoValue(
                f"minProperties {lo} but at most {len(members)} properties can be present",
                _ptr(pointer, "minProperties"),
            )
        # Bounds that cannot bind are left out of the machine (fewer states).
        count_lo = lo if lo > n_required else 0
        count_hi = hi if hi is not None and (extra is not None or hi < len(members)) else None
        if self.opt.any_order and len(members) + (extra is not None) >= 2:
            # A minimum that two or more undeclared members may be needed for counts them
            # exactly only when no two can share a key: the group then remembers them.
            remembered = None
            if extra is not None and count_lo > n_required + 1:
                remembered = self.remembered_extra(key_parts)
            why = self.keyed_refusal(
                dep_index,
                count_lo,
                count_hi,
                n_required,
                extra is not None,
                len(members),
                remembered is not None,
            )
            if remembered is not None:
                extra = remembered
            if why is None:
                if dep_index and count_hi is not None and extra is None and count_lo > n_required:
                    required_idx = {i for i, (_, _, r) in enumerate(members) if r}
                    if not _closed_set_fits(len(members), dep_index, required_idx, count_lo, count_hi):
                        raise _NoValue(
                            f"no set of properties meets the dependencies with between {count_lo} and "
                            f"{count_hi} properties",
                            _ptr(pointer, "maxProperties"),
                        )
                return self.any_order_object(
                    schema, pointer, members, extra, dep_index, count_lo, count_hi, dep_keywords
                )
            self.note(
                _ptr(pointer, "properties"),
                "properties",
                "enforced",
                f"declared properties in schema order only: {why}",
            )
        machine = ObjectMembers(
            members=[Member(text, is_req) for _, text, is_req in members],
            extra=extra,
            sep=sep,
            distinct=distinct,
            min_count=count_lo,
            max_count=count_hi,
            deps=dep_index,
            max_states=self.opt.max_machine_states,
        )
        mode = NONEMPTY if self.pretty else FIRST
        start: str | None = None
        counted = tracked = True
        while True:
            rules: dict[str, str] = {}
            try:
                start = machine.build(self.new_rule, rules, mode)
            except TooManyStates:
                # Drop a dimension (dependencies first, then counts) and check it afterwards.
                if machine.deps and not machine.cut:
                    machine.deps = {}
                    tracked = False
                elif machine.min_count or machine.max_count is not None:
                    machine.min_count, machine.max_count = 0, None
                    counted = False
                else:
                    machine.max_states = 1 << 60  # O(number of properties) rules
                continue
            self.rules.update(rules)
            break
        for key in ("properties", "required", "additionalProperties"):
            if key in schema:
                self.note(_ptr(pointer, key), key, "enforced")
        for key in ("minProperties", "maxProperties"):
            if key in schema:
                if counted:
                    self.note(_ptr(pointer, key), key, "enforced")
                else:
                    self.cannot_enforce(_ptr(pointer, key), key, "too many states to count properties")
        for key, detail in dep_keywords.items():
            if detail is None and not tracked:
                detail = "too many states to track the dependencies"
            if detail is None:
                self.note(_ptr(pointer, key), key, "enforced")
            else:
                self.cannot_enforce(_ptr(pointer, key), key, detail)
        empty_ok = n_required == 0 and (lo == 0 or not counted)
        if self.pretty:
            alts = ['"{" "}"'] if empty_ok else []
            if start is not None:
                alts.append(f'"{{" {opening} {start} {closing} "}}"')
            if not alts:
                raise _NoValue("no object satisfies the property constraints", pointer)
            return " | ".join(alts)
        if start is None:
            raise _NoValue("no object satisfies the property constraints", pointer)
        return f'"{{" {ws} {start} {ws} "}}"'

    @staticmethod
    def keyed_refusal(
        dep_index: dict[int, set[int]],
        lo: int,
        hi: int | None,
        n_required: int,
        has_extra: bool,
        n_members: int,
        remembers_keys: bool = False,
    ) -> str | None:
        """Why an object cannot be a keyed member group (then it keeps schema order), or None.

        The group counts undeclared members as written, so a ``minProperties`` that may need
        two or more undeclared members is exact only when the group remembers their keys
        (``remembers_keys``: ``%key(...)``, possible when every key class has infinitely many
        keys the engine can tell apart: remembered_extra) and refuses a repeated one; otherwise
        ``{"x": 1, "x": 2}`` would count as two properties, and the schema-order machine, whose
        needed undeclared keys cannot repeat, is kept. One undeclared member beside the required
        ones is exact (it is a new key). For
        ``maxProperties`` counting as written is exact on objects whose keys are distinct,
        which is what the mask allows of declared keys too. Dependencies beside a binding
        ``maxProperties`` are exact (keyed.hpp); without undeclared members to pad up to a
        binding ``minProperties`` the engine answers "does a dependency-closed superset fit"
        from a table over the subsets of the properties, so at most ``kMaxFitKeys`` (16)."""
        if hi == 0:
            return "maxProperties is 0"
        if has_extra and lo > n_required + 1 and not remembers_keys:
            return (
                "minProperties may need two or more undeclared properties, which the matcher "
                "cannot tell from one repeated key"
            )
        if dep_index and hi is not None and not has_extra and lo > n_required and n_members > _MAX_FIT_KEYS:
            return (
                f"dependencies beside minProperties and maxProperties over more than {_MAX_FIT_KEYS} "
                "properties need the counting machine"
            )
        return None

    def remembered_extra(self, key_parts: list[tuple[str, str]]) -> str | None:
        """The undeclared member with each class's key marked ``%key(...)`` (cpp/keyed.hpp: the
        matcher remembers the keys and refuses a repeated one), or None when some key class
        has finitely many keys, or a prefix with finitely many continuations whose values the
        engine cannot count (there a refused key could leave nothing to write), or is too big
        to tell."""
        from corral import _native
        from corral import errors as corral_errors

        if not key_parts:
            return None
        for key, _ in key_parts:
            # Every prefix open-ended, or values the engine counts (item_values.hpp: a dead
            # prefix such as `"x\n` with "x\n" held is refused) and infinitely many of them.
            try:
                if _native.probe_open_ended(key, self.opt.max_product_states, {}, True) == 1:
                    continue
                if _native.probe_item_values(key, self.opt.max_product_states, {}) > _MAX_REMEMBERED:
                    continue
            except corral_errors.CompileError:
                pass
            return None
        members = [f"%key( {key} ) {rest}" for key, rest in key_parts]
        return members[0] if len(members) == 1 else "( " + " | ".join(members) + " )"

    def any_order_object(
        self,
        schema: dict[str, Any],
        pointer: str,
        members: list[tuple[str, str, bool]],
        extra: str | None,
        dep_index: dict[int, set[int]],
        lo: int,
        hi: int | None,
        dep_keywords: dict[str, str | None],
    ) -> str:
        """The object as a keyed member group (``%keyed``, cpp/keyed.hpp): declared members in
        any order, each at most once, the required ones all present, undeclared ones (when
        allowed) anywhere; a member's dependencies (``^{i,j}``) present before the object
        closes; ``{lo,hi}`` bounding the number of members, undeclared ones included. The
        matcher keeps the set of keys each open object has seen (and, when counted, how many
        undeclared members), so the grammar has two productions per property instead of a
        state per subset of them."""
        opening, sep, closing, _colon = self.layout()

        def member(i: int, text: str, req: bool) -> str:
            deps = dep_index.get(i)
            needs = sorted(deps - {i}) if deps else ()
            mark = ("!" if req else "") + ("^{" + ",".join(map(str, needs)) + "} " if needs else "")
            return f"{mark}( {text} )"

        parts = ", ".join(member(i, text, req) for i, (_, text, req) in enumerate(members))
        tail = f"; ( {extra} )" if extra is not None else ""
        bounds = f"{{{max(lo, 1)},{'' if hi is None else hi}}}" if lo > 1 or hi is not None else ""
        group = self.new_rule("keyed")
        self.rules[group] = f"%keyed{bounds}( {sep} ; {parts}{tail} )"
        for key in ("properties", "required", "additionalProperties"):
            if key in schema:
                self.note(_ptr(pointer, key), key, "enforced")
        remembers = extra is not None and extra.lstrip("( ").startswith("%key(")
        for key in ("minProperties", "maxProperties"):
            if key in schema:
                why = "undeclared keys remembered: none may repeat" if remembers else ""
                why = why if key == "minProperties" else ""
                self.note(_ptr(pointer, key), key, "enforced", why)
        for key, detail in dep_keywords.items():
            if detail is None:
                self.note(_ptr(pointer, key), key, "enforced")
            else:
                self.cannot_enforce(_ptr(pointer, key), key, detail)
        alts = [f'"{{" {opening} {group} {closing} "}}"']
        if lo == 0 and not any(req for _, _, req in members):
            alts.insert(0, '"{" "}"' if self.pretty else f'"{{" {self.ws} "}}"')
        return " | ".join(alts)

    def dependency_map(
        self, schema: dict[str, Any], pointer: str
    ) -> tuple[dict[str, list[str]], set[str], dict[str, str | None]]:
        """(key -> names that must be present with it, keys that can never be present, keyword ->
        None when enforced exactly or why it is checked after decoding) from dependentRequired,
        dependentSchemas and draft-07 dependencies. A dependent schema is enforced when it only
        requires names (``required``, ``properties`` of ``true``, ``type: object``); otherwise
        its ``required`` part is enforced and the rest is checked after decoding."""
        deps: dict[str, list[str]] = {}
        never: set[str] = set()
        keywords: dict[str, str | None] = {}
        for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            if kw not in schema:
                continue
            where = _ptr(pointer, kw)
            spec = schema[kw]
            if not isinstance(spec, dict):
                raise SchemaError(f"{kw} must be an object", where)
            if kw != "dependencies" and self.old_draft:
                self.note(where, kw, "ignored", "not a keyword before draft 2019-09")
                continue
            keywords[kw] = None
            for key, val in spec.items():
                if isinstance(val, list) and kw != "dependentSchemas":
                    if not all(isinstance(x, str) for x in val):
                        raise SchemaError(f"{kw} lists must hold property names", _ptr(where, key))
                    deps.setdefault(key, [])
                    deps[key] += [x for x in val if x not in deps[key]]
                    continue
                if kw == "dependentRequired":
                    raise SchemaError("dependentRequired values must be arrays of names", _ptr(where, key))
                sub = self.deref(val, _ptr(where, key))
                if sub is True or sub == {}:
                    continue
                if sub is False:
                    never.add(key)
                    continue
                if not isinstance(sub, dict):
                    raise SchemaError(f"{kw} values must be schemas", _ptr(where, key))
                req = sub.get("required", [])
                if isinstance(req, list) and all(isinstance(x, str) for x in req):
                    deps.setdefault(key, [])
                    deps[key] += [x for x in req if x not in deps[key]]
                else:
                    req = None
                rest = {k: v for k, v in sub.items() if k not in _ANNOTATIONS and k != "required"}
                sub_props = rest.pop("properties", {})
                names_only = (
                    req is not None
                    and isinstance(sub_props, dict)
                    and all(v is True or v == {} for v in sub_props.values())
                    and rest.get("type", "object") in ("object", ["object"])
                    and not ({*rest} - {"type"})
                )
                if not names_only:
                    keywords[kw] = "only its required names are enforced" if req else "not expressible"
        return deps, never, keywords

    def extra_key(self, declared: list[str]) -> str:
        """A JSON string key that is none of the declared names (so an extra property can never
        be a second copy of a declared one)."""
        if not declared:
            return self.jstr("(?s:.)*")
        # Strings other than the listed ones: no declared name as a full match, as a
        # negative-lookahead-free regex over the trie of declared names. Written as one quoted
        # string per top-level branch (per first character): where the lowering must split a
        # big complement into several terminals, each keeps its closing quote, so a terminal can
        # end only at the quote. (Split after the opening quote, the branches could end after
        # every character, and every token running past a key's end became a split of its own
        # for the mask's parser checks, about 1,500 per key position on Llama 3.2.)
        branches = [self.jstr(b) if b else '"\\"\\""' for b in _not_in_branches(declared)]
        return branches[0] if len(branches) == 1 else "( " + " | ".join(branches) + " )"
