"""corral's native engine (thin bindings; use the `corral` package API)."""

from collections.abc import Mapping, Sequence
from typing import Annotated

import numpy
from numpy.typing import NDArray


def error_types() -> list[tuple[str, str, str]]:
    """
    Every engine error type as (name, parent name, code), base first; each has a twin of that name, parent and code in corral.errors.
    """

def default_limits() -> dict:
    """The default compile/match limits as a dict."""

class Vocabulary:
    def __init__(self, tokens: Sequence[bytes], special_ids: Sequence[int], eos_ids: Sequence[int], width: int) -> None: ...

    @property
    def size(self) -> int: ...

    @property
    def width(self) -> int: ...

    @property
    def mask_words(self) -> int: ...

    @property
    def eos_ids(self) -> list[int]: ...

    @property
    def trie_nodes(self) -> int: ...

class Matcher:
    def fill_next_token_bitmask(self, bitmask: Annotated[NDArray[numpy.int32], dict(order='C', device='cpu')], row: int = 0) -> None:
        """
        Write the allowed-token mask (packed int32: bit t of word t//32) into row `row` of `bitmask` (numpy or torch CPU int32, shape (batch, ceil(width/32)) or (words,)).
        """

    def accept_token(self, token_id: int) -> bool:
        """
        Advance by one token. Returns False (state unchanged) if the token is not allowed.
        """

    def accept_bytes(self, data: bytes) -> bool:
        """
        Advance by raw bytes (one rollback step). False (unchanged) if invalid.
        """

    def accept_string(self, text: str) -> bool:
        """Advance by the UTF-8 bytes of `text` (one rollback step)."""

    def rollback(self, n: int = 1) -> None:
        """Undo the last n accepted steps."""

    def is_accepting(self) -> bool:
        """Is the output so far complete (EOS allowed)?"""

    def is_terminated(self) -> bool:
        """Has EOS been accepted?"""

    def forced_bytes(self, max_bytes: int = 4096) -> bytes:
        """Bytes every valid continuation starts with (for jump-ahead)."""

    def shortest_completion(self, max_bytes: int = 1048576) -> bytes:
        """The shortest bytes that complete the output."""

    def reset(self) -> None:
        """Back to the initial state."""

    def copy(self) -> Matcher:
        """An independent copy."""

    def __copy__(self) -> Matcher: ...

    def snapshot(self) -> bytes:
        """
        The matcher's state as snapshot bytes (snapshot.hpp): CompiledGrammar.restore on the same grammar, in any process, continues exactly. Raises ArtifactError (reason matcher_error) in the error state.
        """

    @property
    def num_steps(self) -> int: ...

    @property
    def error(self) -> object:
        """Why the matcher entered its error state ('' when healthy)."""

class CompiledGrammar:
    def matcher(self) -> Matcher: ...

    def bind(self, slots: Mapping[str, Sequence[str]]) -> CompiledGrammar:
        """
        Bind every slot (${name} terminal) to its values: a grammar sharing this skeleton's automata and caches. Raises SlotError or LimitExceeded.
        """

    @property
    def slot_names(self) -> list[str]:
        """The grammar's slot names, sorted."""

    @property
    def needs_binding(self) -> bool:
        """Does the grammar have slots that are not bound (a skeleton)?"""

    @property
    def is_binding(self) -> bool:
        """Is this a binding of a skeleton's slots?"""

    @property
    def grammar_text(self) -> str: ...

    @property
    def num_terminals(self) -> int: ...

    def to_bytes(self) -> bytes:
        """
        The grammar's immutable parts as artifact bytes (artifact.hpp). Raises SlotError for a binding.
        """

    @staticmethod
    def from_bytes(data: bytes, vocab: Vocabulary, limits: dict | None = None) -> CompiledGrammar:
        """
        Rebuild a compiled grammar from artifact bytes for `vocab` (no parsing, lowering or automaton construction). `limits` replaces the stored ones. Raises ArtifactError (reason: bad_magic, unsupported_version, engine_version, wrong_vocabulary, corrupt) or LimitExceeded.
        """

    def restore(self, data: bytes) -> Matcher:
        """
        A matcher in the state a Matcher.snapshot() recorded (its steps replayed on this grammar). Raises ArtifactError (reason: bad_magic, unsupported_version, engine_version, wrong_vocabulary, wrong_grammar, wrong_binding, limit, corrupt).
        """

    def cache_stats(self) -> dict: ...

def compile_regex(pattern: str, vocab: Vocabulary, limits: dict) -> CompiledGrammar: ...

def compile_grammar(text: str, start: str, vocab: Vocabulary, limits: dict) -> CompiledGrammar: ...

def compile_json(vocab: Vocabulary, limits: dict) -> CompiledGrammar: ...

def artifact_versions() -> dict:
    """
    The artifact format version this engine writes and reads, and its engine version.
    """

def json_grammar_text() -> str: ...

def probe_expression(rhs: str, max_states: int, limits: dict) -> int:
    """
    DFA states of a regular grammar expression: > 0 states, 0 empty, -1 over max_states (or another limit). Raises CompileError for malformed text.
    """

def probe_open_ended(rhs: str, max_states: int, limits: dict, sinks_ok: bool = False) -> int:
    """
    1 when the one terminal of a regular grammar expression has infinitely many continuations after every live prefix, 0 when not (or several terminals, or empty), -1 over max_states (or another limit); with sinks_ok, accepting prefixes that allow nothing more are exempt (a quoted key: what a %key(...) needs). Raises CompileError for malformed text.
    """

def probe_item_values(rhs: str, max_states: int, limits: dict) -> int:
    """
    For a regular grammar expression that is one quoted JSON string terminal: how many distinct values it holds (capped at 4097, meaning that many or more), -1 when not such a string (or several terminals, empty, over max_states or another limit). Raises CompileError for malformed text.
    """

def compile_times() -> dict[str, float]:
    """
    The calling thread's cumulative compile-stage times in ms (parse, lower without automata, automata, bind, mask-cache walks) and the number of compiles: benchmarks take differences around a call.
    """

def set_compile_nice(nice: int) -> None:
    """
    Run the compiles (compile_*, artifact to_bytes/from_bytes) this thread starts at this nice value (0-19; 0: in this thread), on a helper thread, so that this thread itself -- which holds the GIL between calls -- keeps its priority.
    """

def compile_nice() -> int:
    """This thread's compile nice value."""

def set_compile_clock(cpu: bool) -> None:
    """
    Stage timers of compile_times read each thread's CPU clock (True) or the steady wall clock (False, the default; a CPU clock read is a system call): for benchmarks on a loaded machine.
    """

def set_mask_fast_paths(on: bool) -> None:
    """
    Process-wide: False makes every mask-cache entry computed afterwards come from the reference trie walk (each frontier element stepped on its own), True (the default) lets walks use product states and derived entries. The entries are identical either way; for tests and benchmarks that compare the two.
    """

def set_interior_skip(on: bool) -> None:
    """
    Process-wide: False stops whole-vocabulary walks from skipping the subtrees of tokens that only continue a JSON string's inside (interior_summary.hpp), so the other fast paths (product states, derived entries) are taken where they were before; True (the default) allows the skip. The entries' masks are identical either way; for tests.
    """

def clear_engine_caches() -> None:
    """
    Forget the engine's process-wide automaton, JSON-spelling and regex-terminal memos (benchmarks of a process's first compile; the per-vocabulary mask pool stays).
    """

def automaton_memo_stats() -> dict[str, int]:
    """Entries, bytes, hits and misses of the process-wide automaton memo."""

def check_regex(pattern: str, limits: dict) -> None:
    """
    Compile a regex's automaton as compile_regex would, without a vocabulary (CompileError or LimitExceeded if it cannot).
    """

def fill_next_token_bitmasks(matchers: Sequence[Matcher], bitmask: Annotated[NDArray[numpy.int32], dict(order='C', device='cpu')], rows: Sequence[int] = [], threads: int = 0) -> None:
    """
    Fill the masks of many matchers at once (GIL released, on a persistent worker pool).
    """
