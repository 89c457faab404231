"""The engine API: compile a constraint against a tokenizer, then drive per-sequence matchers.

A :class:`CompiledGrammar` is immutable and thread-safe; create it once per (constraint,
tokenizer) and call :meth:`CompiledGrammar.matcher` for every sequence. A :class:`Matcher`
writes packed int32 token bitmasks (bit ``t`` of word ``t // 32`` set when token ``t`` is
allowed) into caller-provided numpy arrays or torch CPU tensors.

Example
-------
>>> import corral
>>> tok = corral.Tokenizer.from_tokens([b"a", b"b", b"ab", b"<eos>"], special_ids=[3], eos_ids=[3])
>>> m = corral.compile_regex(r"(ab)+", tok).matcher()
>>> mask = corral.allocate_bitmask(1, tok)
>>> m.fill_next_token_bitmask(mask, 0)
>>> corral.allowed_tokens(mask[0], tok)
[0, 2]
>>> m.accept_token(2), m.is_accepting()
(True, True)

Slots: a grammar can leave a terminal's values open (``${name}``, or ``${name:json}`` for a
whole JSON string) and be compiled once as a *skeleton*; :meth:`CompiledGrammar.bind` then
supplies the values per request in microseconds, sharing everything else:

>>> skeleton = corral.compile_grammar('root ::= "cc=" ${cc}', tok)
>>> bound = skeleton.bind({"cc": ["ab", "a"]})
>>> m = bound.matcher()
>>> m.accept_bytes(b"cc=ab"), m.is_accepting()
(True, True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from corral import _native as _core
from corral.errors import SlotError
from corral.tokenizer import Tokenizer

__all__ = [
    "DEFAULT_LIMITS",
    "CompiledGrammar",
    "Matcher",
    "SlotError",
    "allocate_bitmask",
    "allowed_tokens",
    "compile_grammar",
    "compile_json",
    "compile_regex",
    "fill_next_token_bitmasks",
]

from corral._native import Matcher  # noqa: E402  (native per-sequence state, re-exported)

DEFAULT_LIMITS: dict[str, int] = dict(_core.default_limits())
"""Default resource limits. Each may be overridden per compile call as a keyword argument:

``max_nfa_states`` (50,000; NFA states of one terminal, ~40 B each),
``max_dfa_states`` (20,000; DFA states of one terminal, one int32 per byte class each),
``max_total_dfa_states`` (200,000; summed over a grammar's terminals),
``max_nesting`` (200; parenthesis/group nesting in regex and grammar text),
``max_productions`` (100,000; rules and productions after lowering),
``max_compile_ms`` (10,000; wall-clock budget for one compile),
``max_items_per_set`` (50,000; Earley items in one parser step at decode time — past it the
matcher enters its error state instead of exhausting memory),
``max_mask_memo_mb`` (64; memory for whole masks memoised by parser-state signature, per
compiled grammar; 16 KiB per mask at a 128k vocabulary; 0 disables),
``max_slot_values`` (100,000; values bound to one slot by one ``bind``),
``max_slot_bytes`` (1 MiB; bytes of one slot's values as spelled in the output; the slot's
automaton also counts against ``max_dfa_states``),
``mask_share_min_states`` (64; terminals with at least this many DFA states share the mask
entries of states that agree on every path up to the vocabulary's share depth, so a counted
string's positions cost one trie walk instead of one each; a lazily built class table of about
share-depth + 1 ints per state queried; ``2**32 - 1`` turns sharing off, and with it the
per-vocabulary pool of entries shared by grammars whose terminals have the same automaton).
"""


def _limits(limits: dict[str, Any]) -> dict[str, int]:
    unknown = sorted(set(limits) - set(DEFAULT_LIMITS))
    if unknown:
        raise TypeError(f"unknown limit(s) {unknown}; valid limits: {sorted(DEFAULT_LIMITS)}")
    out: dict[str, int] = {}
    for k, v in limits.items():
        low = 0 if k == "max_mask_memo_mb" else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < low or v >= 2**32:
            raise ValueError(f"limit {k} must be an integer in [{low}, 2**32), got {v!r}")
        out[k] = v
    return out


class CompiledGrammar:
    """A constraint compiled against one tokenizer; shared by any number of matchers.

    Attributes
    ----------
    tokenizer : Tokenizer
        The tokenizer it was compiled for.
    source : str
        What was compiled (``"regex"``, ``"grammar"`` or ``"json"``).
    """

    def __init__(self, native: Any, tokenizer: Tokenizer, source: str) -> None:
        self._native = native
        self.tokenizer = tokenizer
        self.source = source
        self.skeleton: CompiledGrammar | None = None
        """For a binding (see :meth:`bind`): the skeleton it binds; otherwise None."""

    def matcher(self) -> Matcher:
        """A fresh matcher at the start of the output. Raises :class:`SlotError` on a skeleton
        whose slots are not bound."""
        return self._native.matcher()

    @property
    def slot_names(self) -> list[str]:
        """The grammar's slot names (``${name}`` terminals), sorted."""
        return list(self._native.slot_names)

    @property
    def needs_binding(self) -> bool:
        """True for a skeleton: it has slots and :meth:`bind` must supply their values before
        a matcher can be created."""
        return bool(self._native.needs_binding)

    def bind(self, slots: Mapping[str, Sequence[str]]) -> CompiledGrammar:
        """Bind every slot to its allowed values: ``{"cost_center": ["CC-104", "CC-109"]}``.

        Returns a compiled grammar that matches exactly like this one with each ``${name}``
        replaced by one of its values (``${name:json}``: the value as a JSON string, spelled as
        ``json.dumps(v, ensure_ascii=False)`` writes it). Only the slots' automata are built
        (a minimal trie of the values: about 50 µs for 1,000 values); the lowered grammar,
        every other automaton and the mask cache are shared with this skeleton, which is never
        recompiled. Bindings are independent and thread-safe; make one per request.

        Raises
        ------
        SlotError
            An unknown or missing slot name, an empty list, a value that is not a str, an empty
            value in a raw ``${name}`` slot, a duplicate value, or binding a binding.
        LimitExceeded
            ``max_slot_values``, ``max_slot_bytes`` or ``max_dfa_states`` (set when compiling).
        """
        return self._derive(_bind_native(self._native, slots), slots)

    def _derive(self, native: Any, slots: Mapping[str, Sequence[str]]) -> CompiledGrammar:
        """The Python object for a binding made from this grammar (subclasses keep their type)."""
        if native is self._native:
            return self
        out = CompiledGrammar(native, self.tokenizer, self.source)
        out.skeleton = self
        return out

    def to_bytes(self) -> bytes:
        """The compiled grammar's immutable parts as engine artifact bytes: the lowered grammar,
        its automata, the limits and the vocabulary's fingerprint, versioned and checksummed
        (format: ``cpp/artifact.cpp``). :meth:`from_bytes` loads them without compiling. The
        mask cache is not included. Raises :class:`SlotError` for a binding (serialise its
        :attr:`skeleton` and bind after loading)."""
        return bytes(self._native.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes, tokenizer: Tokenizer, **limits: int) -> CompiledGrammar:
        """Rebuild a compiled grammar from :meth:`to_bytes` output for ``tokenizer``, without
        parsing, lowering or building automata; it matches exactly like the grammar that
        wrote the bytes. ``limits`` (see :data:`DEFAULT_LIMITS`), when given, replace the
        artifact's stored limits entirely (unnamed ones take their defaults): pass them for
        bytes from an untrusted source, as the loader then checks the automata against them.

        Raises
        ------
        ArtifactError
            With ``reason`` ``bad_magic``, ``unsupported_version``, ``engine_version``,
            ``wrong_vocabulary`` (compiled for another tokenizer) or ``corrupt``.
        LimitExceeded
            The artifact's automata or productions exceed the limits.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        override = {**DEFAULT_LIMITS, **_limits(limits)} if limits else None
        native = _core.CompiledGrammar.from_bytes(bytes(data), _vocab(tokenizer), override)
        return CompiledGrammar(native, tokenizer, "artifact")

    def restore(self, snapshot: bytes) -> Matcher:
        """A matcher in the state :meth:`Matcher.snapshot` recorded, on this grammar: the same
        constraint compiled in any process (fresh, or loaded with :meth:`from_bytes`), for the
        same tokenizer, and for a binding the same slot values. Every later mask, forced bytes,
        accepting state and rollback (to any depth) equal the snapshotted matcher's.

        Restoring replays the recorded steps through the matcher (no masks are computed), so it
        costs what accepting the same output costs, and untrusted bytes can only ever yield a
        state the grammar really reaches. See ``docs/guides/snapshots.md``.

        Raises
        ------
        ArtifactError
            With ``reason`` ``bad_magic``, ``unsupported_version``, ``engine_version``,
            ``wrong_vocabulary`` (another tokenizer), ``wrong_grammar`` (another constraint),
            ``wrong_binding`` (other slot values, or bound vs unbound), ``limit`` (replaying
            hit one of this grammar's limits) or ``corrupt``.
        """
        if not isinstance(snapshot, (bytes, bytearray, memoryview)):
            raise TypeError(f"snapshot must be bytes, got {type(snapshot).__name__}")
        return self._native.restore(bytes(snapshot))

    @property
    def grammar_text(self) -> str:
        """The lowered grammar in canonical text form (terminals as ``/regex/``)."""
        return str(self._native.grammar_text)

    def cache_stats(self) -> dict[str, int]:
        """Mask-cache statistics: entries, bytes, hits, misses, memo_entries, bindings (how many
        :meth:`bind` calls this grammar served) and slot_states (DFA states of a binding's
        slots). A binding reports only its own slot-dependent entries; everything else is
        counted in its skeleton."""
        return dict(self._native.cache_stats())

    def __repr__(self) -> str:
        return f"CompiledGrammar(source={self.source!r}, tokenizer={self.tokenizer.name!r})"


def _bind_native(native: Any, slots: Mapping[str, Sequence[str]]) -> Any:
    """native.bind(slots), with Python-level mistakes (a str where a list belongs, a value that
    is not a str) reported as SlotError. The happy path does no per-value work in Python."""
    if not isinstance(slots, Mapping):
        raise SlotError(
            f"slots must be a mapping of slot name to a list of strings, got {type(slots).__name__}"
        )
    for name, values in slots.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise SlotError(
                f"slot {name!r}: values must be a list of strings, got {type(values).__name__}", str(name)
            )
    try:
        return native.bind(slots if type(slots) is dict else dict(slots))
    except TypeError:
        _explain_bad_slots(slots)
        raise


def _explain_bad_slots(slots: Mapping[str, Sequence[str]]) -> None:
    for name, values in slots.items():
        if not isinstance(name, str):
            raise SlotError(f"slot names must be strings, got {name!r}") from None
        for v in values:
            if not isinstance(v, str):
                raise SlotError(
                    f"slot {name!r}: value {v!r} ({type(v).__name__}) is not a str", name
                ) from None
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise SlotError(
                    f"slot {name!r}: value {v!r} is not valid UTF-8 (a lone surrogate)", name
                ) from None


def _vocab(tokenizer: Tokenizer) -> Any:
    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"expected a corral.Tokenizer, got {type(tokenizer).__name__}")
    return tokenizer.core


def compile_regex(pattern: str, tokenizer: Tokenizer, **limits: int) -> CompiledGrammar:
    """Compile a regular expression (Python ``re`` syntax, full-match semantics).

    Raises :class:`corral.CompileError` (with offset/line/column) for malformed or
    non-regular patterns (backreferences, lookaround) and :class:`corral.LimitExceeded` when a
    limit (see :data:`DEFAULT_LIMITS`) is exceeded.
    """
    if not isinstance(pattern, str):
        raise TypeError("pattern must be a str")
    return CompiledGrammar(
        _core.compile_regex(pattern, _vocab(tokenizer), _limits(limits)), tokenizer, "regex"
    )


def compile_grammar(
    text: str,
    tokenizer: Tokenizer,
    *,
    start: str | None = None,
    syntax: Literal["gbnf", "lark"] = "gbnf",
    **limits: int,
) -> CompiledGrammar:
    """Compile a grammar in GBNF syntax (plus ``/regex/`` terminals), or a Lark grammar with
    ``syntax="lark"`` (see :mod:`corral.grammar.lark`); ``start`` names the rule the whole
    output must match (default ``root`` for GBNF, ``start`` for Lark)."""
    if not isinstance(text, str):
        raise TypeError("grammar text must be a str")
    if syntax == "lark":
        from corral.grammar.lark import START_RULE, lark_to_gbnf

        text = lark_to_gbnf(text, start=start or "start")
        start = START_RULE
    elif syntax != "gbnf":
        raise ValueError(f"syntax must be 'gbnf' or 'lark', got {syntax!r}")
    start = start or "root"
    return CompiledGrammar(
        _core.compile_grammar(text, start, _vocab(tokenizer), _limits(limits)), tokenizer, "grammar"
    )


def compile_json(tokenizer: Tokenizer, **limits: int) -> CompiledGrammar:
    """Compile the built-in grammar for any JSON value (RFC 8259): "JSON mode"."""
    return CompiledGrammar(_core.compile_json(_vocab(tokenizer), _limits(limits)), tokenizer, "json")


def set_compile_priority(nice: int) -> None:
    """Run the engine work of the compiles this thread starts (``compile_*``, loading and saving
    artifacts) at OS nice value ``nice`` (0-19; 0, the default: in this thread, at its priority).

    The work runs on a short-lived native thread that lowers its own priority (per thread on
    Linux; elsewhere it runs at normal priority) while this thread waits with the GIL released.
    This thread keeps its priority on purpose: it runs Python, so it holds the GIL at times, and
    a low-priority thread holding the GIL on a busy machine can wait a long time for a core while
    every other thread of the process (a server's decode loop) waits for the GIL — a priority
    inversion, measured as a 60% slower decode step while compiles ran (docs/benchmarks.md)."""
    if not 0 <= nice <= 19:
        raise ValueError(f"nice must be in 0..19, got {nice}")
    _core.set_compile_nice(nice)


def compile_priority() -> int:
    """This thread's compile nice value (see :func:`set_compile_priority`)."""
    return int(_core.compile_nice())


def allocate_bitmask(batch_size: int, tokenizer: Tokenizer) -> np.ndarray:
    """A zeroed int32 bitmask of shape ``(batch_size, ceil(width / 32))``."""
    return np.zeros((batch_size, (tokenizer.width + 31) // 32), dtype=np.int32)


def fill_next_token_bitmasks(
    matchers: Sequence[Matcher], bitmask: Any, rows: Sequence[int] | None = None, threads: int = 0
) -> None:
    """Fill row ``rows[i]`` (default ``i``) of ``bitmask`` for each matcher, in parallel threads
    with the GIL released. ``threads=0`` uses one per core."""
    _core.fill_next_token_bitmasks(list(matchers), bitmask, list(rows) if rows is not None else [], threads)


def allowed_tokens(row: Any, tokenizer: Tokenizer) -> list[int]:
    """The token ids whose bits are set in one bitmask row (a debugging/test helper)."""
    words = np.ascontiguousarray(np.asarray(row), dtype=np.int32).view(np.uint32)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: tokenizer.width]
    return [int(i) for i in np.flatnonzero(bits)]
