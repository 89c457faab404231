// matcher.hpp — per-sequence constraint state: token masks, accept, rollback, jump-ahead.
//
// In:  a shared CompiledGrammar. Out: for each decoding step, the packed int32 bitmask of
// allowed token ids (bit t of word t/32), written into caller memory.
// A token is allowed iff its full byte string keeps the output a prefix of some sentence; EOS
// is allowed iff the output so far is a complete sentence; special tokens never.
// The matcher never throws into its host on the decode path: a failure (e.g. a parser limit)
// puts it into a sticky error state (error() says why) in which only EOS is allowed.
// Every step also records what it consumed (steps_, aligned with history_), so a snapshot
// (snapshot.hpp) can hand the matcher to another process, which replays the steps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiled_grammar.hpp"
#include "distinct.hpp"
#include "earley.hpp"

namespace corral {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  /// Write the allowed-token mask into `row` (vocab().mask_words() words).
  void fill_next_token_bitmask(std::int32_t* row);
  /// Advance by one token; false (state unchanged) when the token is not allowed.
  bool accept_token(std::int32_t token_id);
  /// Advance by raw bytes (one rollback step); false (state unchanged) when not a valid prefix.
  bool accept_bytes(std::string_view data);
  /// Undo the last n accept_token / accept_bytes steps (n larger than the history resets).
  void rollback(std::size_t n);
  /// Is the output so far a complete sentence (EOS allowed)?
  bool is_accepting() const { return !terminated_ && error_.empty() && parser_.accepting(); }
  /// Has EOS been accepted?
  bool is_terminated() const { return terminated_; }
  /// Bytes every valid continuation starts with (empty when there is a choice or EOS is allowed).
  std::string forced_bytes(std::size_t max_bytes = 4096);
  /// The shortest byte string that makes the output complete.
  std::string shortest_completion(std::size_t max_bytes = 1 << 20);
  void reset();
  std::size_t num_steps() const { return history_.size(); }
  const std::string& error() const { return error_; }
  const CompiledGrammar& compiled() const { return *grammar_; }

 private:
  friend struct SnapshotCodec;  // snapshot.cpp: reads steps_, replays them through the public API
  // What one step consumed: bytes (log_bytes_[previous end, end)), a named token, or EOS.
  struct StepLog {
    enum Kind : std::uint8_t { kBytes, kToken, kEos } kind;
    std::int32_t token;  // kToken / kEos: the token id; kBytes: -1
    std::size_t end;     // end of this step's bytes in log_bytes_
  };
  void log_step(StepLog::Kind kind, std::int32_t token, std::string_view bytes = {});

  struct Scratch {
    std::vector<std::uint64_t> key;
    std::vector<std::uint32_t> item_elem;  // per item of the current set: frontier index or ~0
    std::vector<std::int32_t> mapped;
    std::vector<std::uint64_t> last_key;
    std::shared_ptr<const FrontierEntry> last_entry;
  };
  void frontier_key(Scratch& sc, std::uint32_t subtree);
  void mark_allowed(std::uint32_t* urow, std::uint32_t subtree, std::size_t level);
  void set_error(const std::string& what);
  template <class Advance>
  bool step(Advance&& advance);

  std::shared_ptr<const CompiledGrammar> grammar_;
  EarleyParser parser_;
  // Per step: the parser's set count before it (SIZE_MAX marks the EOS step).
  std::vector<std::size_t> history_;
  // Per step (same length as history_): what it consumed, for snapshots.
  std::vector<StepLog> steps_;
  std::string log_bytes_;
  bool terminated_ = false;
  std::string error_;
  // Scratch for mask computation, one per recursion level (reused: the hot path does not
  // allocate once warm).
  std::vector<Scratch> scratch_;
  bool parser_work_ = false;
  std::vector<std::int32_t> named_;
  // Grammars with %distinct groups (distinct.hpp): the history-dependent part of each mask.
  std::shared_ptr<const DistinctCorrection> distinct_;
  void correct_distinct(std::uint32_t* urow);

};

}  // namespace corral
