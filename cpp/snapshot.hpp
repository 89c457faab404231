// snapshot.hpp — a matcher's state as bytes, and back, on another copy of the same grammar.
//
// In:  a Matcher (matcher_snapshot); snapshot bytes plus a compiled grammar (restore_matcher).
// Out: a versioned, checksummed byte string that names the engine, the vocabulary, the grammar
//      and (for a binding) the slot values it was taken on, and holds the steps the matcher
//      accepted (bytes, named tokens, EOS); restoring replays those steps on a fresh matcher.
// Why replay, not a dump of the parser: a dump's Earley items and DFA states can be checked
//      against the grammar's bounds, but bounds cannot tell a reachable parser state from a
//      forged one (the in-bounds item `start ::= root .` would make the empty output complete).
//      Replaying through the matcher's own accept path makes every restored matcher one the
//      grammar really reaches, so untrusted bytes can never yield a matcher that emits invalid
//      output; it also reproduces every piece of matcher state, present and future, and the
//      whole rollback history, with no per-field serialisation to keep in sync.
// Invariant: restore_matcher(g', matcher_snapshot(m)) for any g' with the same identity as
//      m's grammar (a fresh compile of the same constraint, or its artifact loaded with
//      load_artifact, in any process) is a matcher whose every future mask, forced bytes,
//      accepting state and rollback equal m's. Anything else is refused with an ArtifactError
//      (errors.hpp) whose reason says which check failed. Cost: restoring does the parser work
//      of accepting the same output again (no masks are computed); bytes are O(output).
// The byte format and its checks are documented at the top of snapshot.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "compiled_grammar.hpp"
#include "matcher.hpp"

namespace corral {

/// The layout version of snapshot bytes (bumped when the encoding changes).
inline constexpr std::uint32_t kSnapshotFormatVersion = 1;

/// The matcher's state as snapshot bytes. Throws ArtifactError (reason matcher_error) for a
/// matcher in its error state: there is no state to continue from (rollback clears it).
std::string matcher_snapshot(const Matcher& m);

/// A matcher on `grammar` in the state the snapshot records. Throws ArtifactError: bad_magic,
/// unsupported_version, corrupt, engine_version, wrong_vocabulary, wrong_grammar (taken on
/// another grammar), wrong_binding (another binding of the same skeleton, or bound vs unbound),
/// or limit (replaying hit a parser limit of `grammar`, e.g. one loaded with tighter limits).
Matcher restore_matcher(std::shared_ptr<const CompiledGrammar> grammar, std::string_view data);

/// Recompute the checksum field of edited snapshot bytes (tests hand the strict reader hostile
/// bytes that pass the checksum). No-op on bytes too short to hold a header.
void snapshot_reseal(std::string& data);

}  // namespace corral
