"""The one module that imports the C++ extension (``corral._core``); every native call in the
library goes through the names defined here, so the boundary between Python and C++ is one list.

In:  plain Python values (bytes, str, dicts of limits, numpy/torch buffers).
Out: native handles — a vocabulary, a compiled grammar, matchers — and packed bitmasks written
     into caller memory.

C++ exceptions reach Python as :mod:`corral.errors` classes (the extension's exception
translator maps each C++ class to its Python twin), so callers only ever see corral's errors.
"""

from __future__ import annotations

from corral import _core

__all__ = [
    "CompiledGrammar",
    "Matcher",
    "Vocabulary",
    "artifact_versions",
    "automaton_memo_stats",
    "check_regex",
    "clear_engine_caches",
    "compile_nice",
    "compile_grammar",
    "compile_json",
    "compile_regex",
    "compile_times",
    "default_limits",
    "error_types",
    "fill_next_token_bitmasks",
    "probe_expression",
    "probe_item_values",
    "probe_open_ended",
    "set_compile_clock",
    "set_compile_nice",
    "set_interior_skip",
    "set_mask_fast_paths",
]

#: A vocabulary as byte strings plus special/EOS ids and width (shared by every grammar on it).
Vocabulary = _core.Vocabulary
#: The native compiled grammar; ``CompiledGrammar.from_bytes(data, vocabulary, limits=None)``
#: rebuilds one from artifact bytes (``to_bytes()``) without compiling.
CompiledGrammar = _core.CompiledGrammar
#: () -> {"format_version": int, "engine_version": str} of the artifacts this engine reads.
artifact_versions = _core.artifact_versions
#: Per-sequence matcher state.
Matcher = _core.Matcher
#: (pattern, vocabulary, limits) -> native compiled grammar.
compile_regex = _core.compile_regex
#: (grammar text, start rule, vocabulary, limits) -> native compiled grammar.
compile_grammar = _core.compile_grammar
#: () -> this thread's cumulative compile-stage times in ms (benchmarks take differences).
compile_times = _core.compile_times
#: (cpu: bool) -> compile_times' stages on each thread's CPU clock (True) or the wall clock.
set_compile_clock = _core.set_compile_clock
#: (nice: int) -> compiles this thread starts run on a helper thread at this nice value (0: here).
set_compile_nice = _core.set_compile_nice
#: () -> this thread's compile nice value.
compile_nice = _core.compile_nice
#: (on: bool) -> False: later mask-cache entries come from the reference walk (tests compare).
set_mask_fast_paths = _core.set_mask_fast_paths
#: (on: bool) -> False: later whole-vocabulary walks do not skip clean string-interior subtrees.
set_interior_skip = _core.set_interior_skip
#: () -> forget the engine's process-wide automaton memos (benchmarks of a first compile).
clear_engine_caches = _core.clear_engine_caches
#: () -> entries, bytes, hits, misses of the process-wide automaton memo.
automaton_memo_stats = _core.automaton_memo_stats
#: (vocabulary, limits) -> the native compiled grammar of any JSON value.
compile_json = _core.compile_json
#: (matchers, bitmask, rows, threads): fill many rows with the GIL released.
fill_next_token_bitmasks = _core.fill_next_token_bitmasks
#: () -> the engine's default limits as (name, value) pairs.
default_limits = _core.default_limits
#: (grammar right-hand side, max DFA states, limits) -> states (> 0), 0 (empty language) or -1
#: (over max_states or another limit); CompileError for malformed text. No vocabulary needed.
probe_expression = _core.probe_expression
#: (grammar right-hand side, max DFA states, limits) -> 1 when its one terminal has infinitely
#: many continuations after every live prefix, 0 when not (or several terminals, or empty), -1
#: over max_states or another limit; CompileError for malformed text (distinct groups).
probe_open_ended = _core.probe_open_ended
#: (rhs, max_states, limits) -> values of a quoted JSON string terminal (capped at 4097), or -1.
probe_item_values = _core.probe_item_values
#: (pattern, limits): CompileError / LimitExceeded if compile_regex could not compile it.
check_regex = _core.check_regex
#: () -> (name, parent, code) of every engine error type (each twinned in corral.errors).
error_types = _core.error_types
