// matcher.cpp — see matcher.hpp.
#include "matcher.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace corral {
namespace {
constexpr std::size_t kEosStep = std::numeric_limits<std::size_t>::max();

// A skeleton's slots match nothing until bound: refuse to match it rather than let a model
// write around fields it can never fill.
const std::shared_ptr<const CompiledGrammar>& require_bound(const std::shared_ptr<const CompiledGrammar>& g) {
  if (g->needs_binding()) {
    std::string names;
    for (const std::string& n : g->slot_names()) names += (names.empty() ? "" : ", ") + n;
    throw SlotError("", "the grammar has slots that are not bound (" + names +
                            "): bind their values first (CompiledGrammar.bind)");
  }
  return g;
}
}  // namespace

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(require_bound(grammar)),
      parser_(grammar_->grammar(), grammar_->dfas().data(), grammar_->limits().max_items_per_set) {
  distinct_ = grammar_->distinct_correction();
  if (distinct_) parser_.set_item_values(&distinct_->item_values());
}

// distinct.hpp: the cached part of a mask is computed with value checks off (it depends on the
// number of items only); this clears the tokens that would close a duplicate.
void Matcher::correct_distinct(std::uint32_t* urow) {
  if (distinct_) distinct_->apply(parser_, grammar_->vocab(), urow);
}

void Matcher::reset() {
  parser_.reset();
  history_.clear();
  steps_.clear();
  log_bytes_.clear();
  terminated_ = false;
  error_.clear();
}

void Matcher::log_step(StepLog::Kind kind, std::int32_t token, std::string_view bytes) {
  log_bytes_.append(bytes.data(), bytes.size());
  steps_.push_back(StepLog{kind, token, log_bytes_.size()});
}

void Matcher::set_error(const std::string& what) {
  if (error_.empty()) error_ = what;
}

void Matcher::frontier_key(Scratch& sc, std::uint32_t subtree) {
  sc.key.clear();
  const std::size_t b = parser_.cur_begin(), e = parser_.cur_end();
  for (std::size_t i = b; i < e; ++i) {
    const Item& it = parser_.item(i);
    if (it.dstate >= 0) sc.key.push_back(CompiledGrammar::key_element(parser_.scanning_terminal(it), it.dstate));
  }
  std::sort(sc.key.begin(), sc.key.end());
  sc.key.erase(std::unique(sc.key.begin(), sc.key.end()), sc.key.end());
  sc.item_elem.assign(e - b, ~0u);
  for (std::size_t i = b; i < e; ++i) {
    const Item& it = parser_.item(i);
    if (it.dstate < 0) continue;
    auto k = CompiledGrammar::key_element(parser_.scanning_terminal(it), it.dstate);
    sc.item_elem[i - b] = static_cast<std::uint32_t>(std::lower_bound(sc.key.begin(), sc.key.end(), k) - sc.key.begin());
  }
  if (subtree != 0) sc.key.push_back(CompiledGrammar::key_subtree(subtree));
}

// Mark the tokens allowed from the parser's current state: at the vocabulary root (level 0,
// `subtree` 0) or, after a parser step inside a token, below trie node `subtree` (whose own
// tokens the caller has handled). Recursion depth is bounded by the longest token.
void Matcher::mark_allowed(std::uint32_t* urow, std::uint32_t subtree, std::size_t level) {
  // Sized once (recursion depth <= longest token), so references stay valid while recursing.
  if (scratch_.empty()) scratch_.resize(grammar_->vocab().trie().max_depth() + 2);
  Scratch& sc = scratch_[level];
  frontier_key(sc, subtree);
  // Consecutive steps inside one terminal usually share a frontier: reuse the last entry
  // without hashing or locking.
  if (sc.key != sc.last_key || !sc.last_entry) {
    sc.last_entry = grammar_->frontier_entry(sc.key);
    sc.last_key = sc.key;
  }
  const std::shared_ptr<const FrontierEntry> entry = sc.last_entry;
  const Vocabulary& vocab = grammar_->vocab();
  const std::uint32_t words = vocab.mask_words();
  if (level == 0) {
    std::memcpy(urow, entry->allowed.data(), words * sizeof(std::uint32_t));
  } else if (!entry->allowed.empty()) {
    for (std::uint32_t w = 0; w < words; ++w) urow[w] |= entry->allowed[w];
  } else {
    for (std::int32_t t : entry->allowed_ids) urow[static_cast<std::size_t>(t) >> 5] |= 1u << (t & 31);
  }
  if (entry->groups.empty() && !entry->shared) return;
  parser_work_ = true;
  const TokenTrie& t = vocab.trie();
  const std::size_t n_items = sc.item_elem.size();
  auto check_groups = [&](const std::vector<FrontierEntry::Group>& groups) {
    for (const auto& g : groups) {
      sc.mapped.resize(n_items);
      for (std::size_t i = 0; i < n_items; ++i)
        sc.mapped[i] = sc.item_elem[i] == ~0u ? -1 : g.states[sc.item_elem[i]];
      const std::size_t before = parser_.num_sets();
      if (!parser_.push_states(sc.mapped.data())) continue;
      const std::size_t base = parser_.num_sets();  // parser state at the split node
      const TokenTrie& h = g.heads;
      std::uint32_t i = 1;
      while (i < h.num_nodes()) {
        parser_.pop_to(base + h.depth(i) - 1);
        if (!parser_.push_byte(h.byte(i))) {
          i = h.subtree_end(i);
          continue;
        }
        // Each dead node with this head: its own tokens are valid; below it, recurse from the
        // parser state after the head (its lexical part is cached per frontier and subtree).
        for (const std::int32_t* x = h.tokens_begin(i); x != h.tokens_end(i); ++x) {
          const std::uint32_t dead = g.dead[static_cast<std::size_t>(*x)];
          for (const std::int32_t* tok = t.tokens_begin(dead); tok != t.tokens_end(dead); ++tok)
            urow[static_cast<std::size_t>(*tok) >> 5] |= 1u << (*tok & 31);
          if (dead + 1 < t.subtree_end(dead)) mark_allowed(urow, dead, level + 1);
        }
        ++i;
      }
      parser_.pop_to(before);
    }
  };
  check_groups(entry->groups);
  // (A chain: a shared short part may itself be a delta entry sharing its anchor's groups.)
  for (const FrontierEntry* s = entry->shared.get(); s; s = s->shared.get()) check_groups(s->groups);
}

void Matcher::fill_next_token_bitmask(std::int32_t* row) {
  const Vocabulary& vocab = grammar_->vocab();
  const std::uint32_t words = vocab.mask_words();
  auto set_eos = [&] {
    for (std::int32_t id : vocab.eos_ids())
      row[static_cast<std::size_t>(id) >> 5] |= static_cast<std::int32_t>(1u << (id & 31));
  };
  if (terminated_ || !error_.empty()) {
    // Finished (or failed) rows only ever produce EOS, so a batched loop can keep sampling them.
    std::memset(row, 0, words * sizeof(std::int32_t));
    set_eos();
    return;
  }
  const std::size_t mark = parser_.num_sets();
  try {
    auto* urow = reinterpret_cast<std::uint32_t*>(row);
    const bool memo = grammar_->limits().max_mask_memo_mb > 0;
    CompiledGrammar::Signature sig{0, 0};
    if (memo && !grammar_->memo_empty()) {
      sig = parser_.state_signature();
      if (auto hit = grammar_->memo_get(sig)) {
        std::memcpy(urow, hit->data(), words * sizeof(std::uint32_t));
        correct_distinct(urow);
        return;
      }
    }
    parser_work_ = false;
    // Did this computation consult a slot's automaton? (Then the mask belongs to the binding;
    // otherwise every binding of the skeleton can reuse it.)
    parser_.clear_slot_seen();
    const bool slot_state = parser_.slot_items();
    const std::size_t values = parser_.values().size();
    parser_.set_check_values(false);
    mark_allowed(urow, 0, 0);
    parser_.set_check_values(true);
    parser_.values().truncate(values);
    named_.clear();
    parser_.expected_tokens(named_);
    for (std::int32_t id : named_) urow[static_cast<std::size_t>(id) >> 5] |= 1u << (id & 31);
    if (parser_.accepting()) set_eos();
    // Only masks that needed the parser are worth memoising; the rest are one cached copy anyway.
    if (parser_work_ && memo) {
      if (sig.first == 0 && sig.second == 0) sig = parser_.state_signature();
      grammar_->memo_put(sig, urow, slot_state || parser_.slot_seen());
    }
    correct_distinct(urow);
  } catch (const std::exception& e) {
    parser_.set_check_values(true);
    parser_.pop_to(mark);
    set_error(e.what());
    std::memset(row, 0, words * sizeof(std::int32_t));
    set_eos();
  }
}

template <class Advance>
bool Matcher::step(Advance&& advance) {
  // One rollback step: all of it or nothing. A parser limit becomes the sticky error state.
  const std::size_t mark = parser_.num_sets();
  try {
    if (!advance()) {
      parser_.pop_to(mark);
      return false;
    }
  } catch (const std::exception& e) {
    parser_.pop_to(mark);
    set_error(e.what());
    return false;
  }
  history_.push_back(mark);
  return true;
}

bool Matcher::accept_token(std::int32_t token_id) {
  if (terminated_ || !error_.empty()) return false;
  const Vocabulary& vocab = grammar_->vocab();
  if (token_id < 0 || static_cast<std::uint32_t>(token_id) >= vocab.size()) return false;
  if (grammar_->names_tokens()) {
    // A token the grammar names explicitly (e.g. <|eot_id|> or <[id]>) is matched as itself.
    if (step([&] { return parser_.push_token(token_id); })) {
      log_step(StepLog::kToken, token_id);
      return true;
    }
    if (!error_.empty()) return false;
  }
  if (vocab.is_eos(token_id)) {
    if (!parser_.accepting()) return false;
    terminated_ = true;
    history_.push_back(kEosStep);
    log_step(StepLog::kEos, token_id);
    return true;
  }
  if (vocab.is_special(token_id)) return false;
  const std::string& bytes = vocab.bytes(token_id);
  if (bytes.empty()) return false;
  return accept_bytes(bytes);
}

bool Matcher::accept_bytes(std::string_view data) {
  if (terminated_ || !error_.empty()) return false;
  const bool ok = step([&] {
    for (char c : data)
      if (!parser_.push_byte(static_cast<std::uint8_t>(c))) return false;
    return true;
  });
  if (ok) log_step(StepLog::kBytes, -1, data);
  return ok;
}


void Matcher::rollback(std::size_t n) {
  if (n >= history_.size()) {
    reset();
    return;
  }
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t mark = history_.back();
    history_.pop_back();
    steps_.pop_back();
    log_bytes_.resize(steps_.empty() ? 0 : steps_.back().end);
    if (mark == kEosStep) {
      terminated_ = false;
    } else {
      parser_.pop_to(mark);
    }
  }
  error_.clear();
}

std::string Matcher::forced_bytes(std::size_t max_bytes) {
  std::string out;
  if (terminated_ || !error_.empty()) return out;
  const std::size_t mark = parser_.num_sets();
  try {
    while (out.size() < max_bytes && !parser_.accepting()) {
      auto bits = parser_.next_bytes();
      int count = 0, byte = -1;
      for (int w = 0; w < 4; ++w) {
        count += __builtin_popcountll(bits[static_cast<std::size_t>(w)]);
        if (bits[static_cast<std::size_t>(w)] && byte < 0) byte = w * 64 + __builtin_ctzll(bits[static_cast<std::size_t>(w)]);
      }
      if (count != 1) break;
      if (!parser_.push_byte(static_cast<std::uint8_t>(byte))) break;
      out.push_back(static_cast<char>(byte));
    }
  } catch (const std::exception&) {
    // A parser limit while looking ahead only shortens the forced string.
  }
  parser_.pop_to(mark);
  return out;
}

std::string Matcher::shortest_completion(std::size_t max_bytes) {
  if (terminated_ || !error_.empty()) return std::string();
  return distinct_ ? distinct_completion(parser_, max_bytes) : parser_.shortest_completion(max_bytes);
}

}  // namespace corral
