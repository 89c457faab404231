// matcher.cpp — see matcher.hpp.
#include "matcher.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace corral {
namespace {
constexpr std::size_t kEosStep = std::numeric_limits<std::size_t>::max();
}

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), parser_(grammar_->grammar(), grammar_->limits().max_items_per_set) {}

void Matcher::reset() {
  parser_.reset();
  history_.clear();
  terminated_ = false;
  error_.clear();
}

void Matcher::set_error(const std::string& what) {
  if (error_.empty()) error_ = what;
}

void Matcher::frontier_key() {
  key_.clear();
  const std::size_t b = parser_.cur_begin(), e = parser_.cur_end();
  for (std::size_t i = b; i < e; ++i) {
    const Item& it = parser_.item(i);
    if (it.dstate >= 0) key_.push_back(CompiledGrammar::key_element(parser_.scanning_terminal(it), it.dstate));
  }
  std::sort(key_.begin(), key_.end());
  key_.erase(std::unique(key_.begin(), key_.end()), key_.end());
  item_elem_.assign(e - b, ~0u);
  for (std::size_t i = b; i < e; ++i) {
    const Item& it = parser_.item(i);
    if (it.dstate < 0) continue;
    auto k = CompiledGrammar::key_element(parser_.scanning_terminal(it), it.dstate);
    item_elem_[i - b] = static_cast<std::uint32_t>(std::lower_bound(key_.begin(), key_.end(), k) - key_.begin());
  }
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
  try {
    frontier_key();
    auto entry = grammar_->frontier_entry(key_);
    std::memcpy(row, entry->allowed.data(), words * sizeof(std::int32_t));
    auto* urow = reinterpret_cast<std::uint32_t*>(row);
    const std::size_t n_items = item_elem_.size();
    for (const auto& g : entry->groups) {
      mapped_.resize(n_items);
      for (std::size_t i = 0; i < n_items; ++i)
        mapped_[i] = item_elem_[i] == ~0u ? -1 : g.states[item_elem_[i]];
      const std::size_t before = parser_.num_sets();
      if (!parser_.push_states(mapped_.data())) continue;
      const std::size_t base = parser_.num_sets();  // parser state at the split node
      const TokenTrie& t = vocab.trie();
      const TokenTrie& h = g.heads;
      std::uint32_t i = 1;
      while (i < h.num_nodes()) {
        parser_.pop_to(base + h.depth(i) - 1);
        if (!parser_.push_byte(h.byte(i))) {
          i = h.subtree_end(i);
          continue;
        }
        // Every dead node with this head: its tokens are valid; walk below it.
        for (const std::int32_t* x = h.tokens_begin(i); x != h.tokens_end(i); ++x) {
          const std::uint32_t dead = g.dead[static_cast<std::size_t>(*x)];
          for (const std::int32_t* tok = t.tokens_begin(dead); tok != t.tokens_end(dead); ++tok)
            urow[static_cast<std::size_t>(*tok) >> 5] |= 1u << (*tok & 31);
          const std::uint32_t end = t.subtree_end(dead);
          if (dead + 1 == end) continue;
          const std::size_t sub_base = parser_.num_sets();
          const std::uint32_t dx = t.depth(dead);
          std::uint32_t j = dead + 1;
          while (j < end) {
            parser_.pop_to(sub_base + (t.depth(j) - dx) - 1);
            if (parser_.push_byte(t.byte(j))) {
              for (const std::int32_t* tok = t.tokens_begin(j); tok != t.tokens_end(j); ++tok)
                urow[static_cast<std::size_t>(*tok) >> 5] |= 1u << (*tok & 31);
              ++j;
            } else {
              j = t.subtree_end(j);
            }
          }
          parser_.pop_to(sub_base);
        }
        ++i;
      }
      parser_.pop_to(before);
    }
    if (parser_.accepting()) set_eos();
  } catch (const std::exception& e) {
    set_error(e.what());
    std::memset(row, 0, words * sizeof(std::int32_t));
    set_eos();
  }
}

bool Matcher::accept_token(std::int32_t token_id) {
  if (terminated_ || !error_.empty()) return false;
  const Vocabulary& vocab = grammar_->vocab();
  if (token_id < 0 || static_cast<std::uint32_t>(token_id) >= vocab.size()) return false;
  if (vocab.is_eos(token_id)) {
    if (!parser_.accepting()) return false;
    terminated_ = true;
    history_.push_back(kEosStep);
    return true;
  }
  if (vocab.is_special(token_id)) return false;
  const std::string& bytes = vocab.bytes(token_id);
  if (bytes.empty()) return false;
  return accept_bytes(bytes);
}

bool Matcher::accept_bytes(std::string_view data) {
  if (terminated_ || !error_.empty()) return false;
  const std::size_t mark = parser_.num_sets();
  try {
    for (char c : data) {
      if (!parser_.push_byte(static_cast<std::uint8_t>(c))) {
        parser_.pop_to(mark);
        return false;
      }
    }
  } catch (const std::exception& e) {
    parser_.pop_to(mark);
    set_error(e.what());
    return false;
  }
  history_.push_back(mark);
  return true;
}

void Matcher::rollback(std::size_t n) {
  if (n >= history_.size()) {
    reset();
    return;
  }
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t mark = history_.back();
    history_.pop_back();
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
  return parser_.shortest_completion(max_bytes);
}

}  // namespace corral
