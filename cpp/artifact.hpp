// artifact.hpp — a compiled grammar's immutable parts as bytes, and back.
//
// In:  a CompiledGrammar (to_artifact); artifact bytes plus the vocabulary to bind them to
//      (load_artifact).
// Out: a versioned, checksummed byte string holding the lowered grammar (nonterminal names,
//      productions, terminals with their DFAs, token and slot terminals), the Limits and the
//      vocabulary's fingerprint; loading rebuilds an equivalent CompiledGrammar without parsing
//      or lowering grammar text and without building any automaton.
// Invariant: load_artifact(to_artifact(g), vocab) matches exactly like g (same automata state
//      for state, same productions in the same order, derived tables recomputed by
//      Grammar::finalize), so every mask is identical. The loader is a strict parser of
//      untrusted bytes: every count, length and index is checked before it is used, every
//      allocation is bounded by the bytes that remain, and anything it refuses is an
//      ArtifactError (errors.hpp) — never a crash, a hang or a partially built grammar.
// The byte format and its checks are documented at the top of artifact.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "compiled_grammar.hpp"

namespace corral {

/// The layout version of the bytes (bumped when the encoding changes).
inline constexpr std::uint32_t kArtifactFormatVersion = 6;  // 2: keyed groups (keyed.hpp); 3: unique counts (unique.hpp); 4: distinct groups (distinct.hpp); 5: keyed dependencies; 6: remembered undeclared keys
/// The engine whose lowering, automata and matcher an artifact was made by. Bump it whenever
/// a change makes the same grammar text lower or match differently: an artifact from another
/// engine version is refused (reason engine_version) rather than trusted to agree.
inline constexpr const char* kEngineVersion = "corral-engine 0.1.0 ir1";

/// Serialise the grammar's immutable parts. Throws SlotError for a binding (serialise its
/// skeleton and bind the loaded one: bindings are per request).
std::string to_artifact(const CompiledGrammar& g);

/// Rebuild a compiled grammar from artifact bytes against `vocab`. `limits`: when non-null they
/// replace the artifact's stored limits (for bytes from an untrusted source: the loader checks
/// the automata and production counts against them and the matcher runs under them).
/// Throws ArtifactError (see errors.hpp for the reasons) or LimitExceeded.
std::shared_ptr<const CompiledGrammar> load_artifact(std::string_view data, std::shared_ptr<const Vocabulary> vocab,
                                                     const Limits* limits = nullptr);

/// CRC-32 (IEEE 802.3, the polynomial zlib.crc32 uses) of `data`: the artifact's checksum.
std::uint32_t artifact_crc32(std::string_view data);

/// Recompute the checksum field of edited artifact bytes (tests use it to hand the strict
/// parser hostile bytes that pass the checksum). No-op on bytes too short to hold a header.
void artifact_reseal(std::string& data);

}  // namespace corral
