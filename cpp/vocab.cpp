// vocab.cpp — Vocabulary validation and the preorder token trie (see vocab.hpp).
#include "vocab.hpp"

#include <algorithm>

#include "errors.hpp"

namespace corral {
namespace {

// Two independent 64-bit multiply-rotate lanes over the little-endian encoding of the
// vocabulary, each finished with the splitmix64 avalanche.
class Fingerprint {
 public:
  void add(std::uint64_t x) {
    a_ = rotl((a_ ^ x) * 0x9E3779B97F4A7C15ull, 29);
    b_ = rotl((b_ ^ x) * 0xC2B2AE3D27D4EB4Full, 31) + 0x165667B19E3779F9ull;
  }
  void add_bytes(const std::string& s) {
    add(s.size());
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      std::uint64_t w = 0;
      for (int k = 0; k < 8; ++k) w |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[i + k])) << (8 * k);
      add(w);
    }
    std::uint64_t w = 0;
    for (int k = 0; i < s.size(); ++i, ++k) w |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[i])) << (8 * k);
    add(w);
  }
  std::array<std::uint64_t, 2> finish() const { return {mix(a_), mix(b_ ^ a_)}; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t a_ = 0x636F7272616C2E76ull, b_ = 0x6F636162756C6172ull;  // "corral.v", "ocabular"
};

}  // namespace

TokenTrie TokenTrie::build(std::vector<std::pair<std::string_view, std::int32_t>> entries) {
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [](const auto& e) { return e.first.empty(); }),
                entries.end());
  // Sorted byte strings visit the trie in preorder, so nodes are appended in preorder.
  std::sort(entries.begin(), entries.end());
  TokenTrie t;
  t.byte_.push_back(0);
  t.depth_.push_back(0);
  t.subtree_end_.push_back(0);
  std::vector<std::uint32_t> path{0};  // node at each depth along the current token
  // In sorted order a token always ends at the node created last (its own, or the one of the
  // equal byte string before it), so each node's tokens are appended to toks_ in node order.
  t.byte_.reserve(entries.size() + 1);
  t.tok_begin_.push_back(0);
  std::string_view prev;
  for (const auto& [bytes, id] : entries) {
    std::size_t common = 0;
    while (common < prev.size() && common < bytes.size() && prev[common] == bytes[common]) ++common;
    // Close the nodes deeper than the common prefix.
    while (path.size() > common + 1) {
      t.subtree_end_[path.back()] = static_cast<std::uint32_t>(t.byte_.size());
      path.pop_back();
    }
    for (std::size_t d = common; d < bytes.size(); ++d) {
      t.byte_.push_back(static_cast<std::uint8_t>(bytes[d]));
      t.depth_.push_back(static_cast<std::uint32_t>(d + 1));
      t.subtree_end_.push_back(0);
      t.tok_begin_.push_back(static_cast<std::uint32_t>(t.toks_.size()));
      path.push_back(static_cast<std::uint32_t>(t.byte_.size() - 1));
    }
    t.toks_.push_back(id);
    t.max_depth_ = std::max(t.max_depth_, static_cast<std::uint32_t>(bytes.size()));
    prev = bytes;
  }
  while (!path.empty()) {
    t.subtree_end_[path.back()] = static_cast<std::uint32_t>(t.byte_.size());
    path.pop_back();
  }
  t.tok_begin_.push_back(static_cast<std::uint32_t>(t.toks_.size()));
  t.toks_.push_back(0);  // the sentinel set_token_bits reads after a tokenless last node
  // Deepest token per subtree: in preorder a node's subtree is [n, subtree_end(n)), so a
  // reverse scan folds each node into its parent (found with a path stack on a forward scan).
  const std::uint32_t nodes = t.num_nodes();
  std::vector<std::uint32_t> parent(nodes, 0), at_depth(t.max_depth_ + 1, 0);
  for (std::uint32_t i = 1; i < nodes; ++i) {
    parent[i] = at_depth[t.depth_[i] - 1];
    at_depth[t.depth_[i]] = i;
  }
  t.max_token_depth_.assign(nodes, 0);
  for (std::uint32_t i = nodes; i-- > 0;) {
    if (t.tok_begin_[i] != t.tok_begin_[i + 1]) t.max_token_depth_[i] = std::max(t.max_token_depth_[i], t.depth_[i]);
    if (i > 0) t.max_token_depth_[parent[i]] = std::max(t.max_token_depth_[parent[i]], t.max_token_depth_[i]);
  }
  return t;
}

std::size_t TokenTrie::memory_bytes() const {
  return byte_.size() * (1 + 4 + 4 + 4 + 4) + toks_.size() * 4;
}

Vocabulary::Vocabulary(std::vector<std::string> tokens, const std::vector<std::int32_t>& special_ids,
                       std::vector<std::int32_t> eos_ids, std::uint32_t width)
    : tokens_(std::move(tokens)), eos_(std::move(eos_ids)), width_(width) {
  const auto n = static_cast<std::int64_t>(tokens_.size());
  if (width_ < tokens_.size())
    throw TokenizerError("logits width " + std::to_string(width_) + " is smaller than the vocabulary (" +
                         std::to_string(n) + " tokens)");
  special_.assign(tokens_.size(), 0);
  for (std::int32_t id : special_ids) {
    if (id < 0 || id >= n)
      throw TokenizerError("special token id " + std::to_string(id) + " is outside the vocabulary");
    special_[static_cast<std::size_t>(id)] = 1;
  }
  for (std::int32_t id : eos_) {
    if (id < 0 || id >= n)
      throw TokenizerError("EOS token id " + std::to_string(id) + " is outside the vocabulary");
  }
  {
    Fingerprint fp;
    fp.add(width_);
    fp.add(tokens_.size());
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      fp.add_bytes(tokens_[i]);
      fp.add(special_[i]);
    }
    std::vector<std::int32_t> eos_sorted(eos_);
    std::sort(eos_sorted.begin(), eos_sorted.end());
    fp.add(eos_sorted.size());
    for (std::int32_t id : eos_sorted) fp.add(static_cast<std::uint32_t>(id));
    fingerprint_ = fp.finish();
  }
  std::vector<std::pair<std::string_view, std::int32_t>> entries;
  entries.reserve(tokens_.size());
  for (std::int64_t i = 0; i < n; ++i) {
    if (special_[static_cast<std::size_t>(i)]) continue;
    bool eos = std::find(eos_.begin(), eos_.end(), static_cast<std::int32_t>(i)) != eos_.end();
    if (eos) continue;  // EOS is governed by the grammar's accepting state, never by its bytes
    entries.emplace_back(tokens_[static_cast<std::size_t>(i)], static_cast<std::int32_t>(i));
  }
  trie_ = TokenTrie::build(entries);
  // Share depth: the smallest D >= 8 whose "long" nodes (a token deeper than D below) are at
  // most 1/16 of the trie, so walking them per state costs a small share of a full walk.
  const std::uint32_t maxd = trie_.max_depth();
  std::vector<std::uint64_t> with_depth(maxd + 1, 0);  // nodes whose deepest token is at d
  for (std::uint32_t i = 1; i < trie_.num_nodes(); ++i) ++with_depth[trie_.max_token_depth(i)];
  share_depth_ = maxd;
  std::uint64_t long_nodes = 0;  // nodes with a token deeper than share_depth_ below
  for (std::uint32_t d = maxd; d > 8; --d) {
    if ((long_nodes + with_depth[d]) * 16 > trie_.num_nodes()) break;
    long_nodes += with_depth[d];
    share_depth_ = d - 1;
  }
  // The long tokens' own trie, and where its nodes are in trie_: follow a token below each
  // node up from that token's end node in trie_.
  std::vector<std::pair<std::string_view, std::int32_t>> long_entries;
  for (const auto& e : entries)
    if (e.first.size() > share_depth_) long_entries.push_back(e);
  long_trie_ = TokenTrie::build(std::move(long_entries));
  std::vector<std::uint32_t> parent(trie_.num_nodes(), 0), at_depth(trie_.max_depth() + 1, 0);
  std::vector<std::uint32_t> end_node(tokens_.size(), 0);
  for (std::uint32_t i = 1; i < trie_.num_nodes(); ++i) {
    parent[i] = at_depth[trie_.depth(i) - 1];
    at_depth[trie_.depth(i)] = i;
    for (const std::int32_t* t = trie_.tokens_begin(i); t != trie_.tokens_end(i); ++t) end_node[static_cast<std::size_t>(*t)] = i;
  }
  long_to_full_.assign(long_trie_.num_nodes(), 0);
  for (std::uint32_t i = 1; i < long_trie_.num_nodes(); ++i) {
    std::uint32_t leaf = i;
    while (long_trie_.tokens_begin(leaf) == long_trie_.tokens_end(leaf)) ++leaf;
    std::uint32_t n = end_node[static_cast<std::size_t>(*long_trie_.tokens_begin(leaf))];
    while (trie_.depth(n) > long_trie_.depth(i)) n = parent[n];
    long_to_full_[i] = n;
  }
}

bool Vocabulary::is_eos(std::int32_t id) const {
  return std::find(eos_.begin(), eos_.end(), id) != eos_.end();
}

}  // namespace corral
