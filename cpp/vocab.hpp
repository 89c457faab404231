// vocab.hpp — a model's vocabulary as the engine sees it, and the token trie.
//
// In:  each token id's exact byte string, the special ids, the EOS ids, the logits width.
// Out: a prefix trie over the byte strings of the *ordinary* tokens (special and empty tokens
//      are not in it, so no byte-level walk can ever allow them).
// Knows nothing about grammars. The trie is stored in preorder with each node's subtree end, so
// a mask computation walks it as a flat array and skips a dead subtree with one assignment.
// Vocabulary-level summary (computed once, shared by every grammar compiled on the vocabulary):
// per trie node, the depth of the deepest token in its subtree, and the *share depth* D — the
// smallest token length such that the nodes on paths to longer tokens are a small share of the
// trie. Mask entries of automaton states that agree on every path of at most D bytes are shared
// (compiled_grammar.hpp); only the few longer tokens are walked per state.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace corral {

class TokenTrie {
 public:
  /// Build from (bytes, token id) pairs; pairs with empty bytes are ignored.
  static TokenTrie build(std::vector<std::pair<std::string_view, std::int32_t>> entries);

  std::uint32_t num_nodes() const { return static_cast<std::uint32_t>(byte_.size()); }
  // Node 0 is the root (depth 0, no byte).
  std::uint8_t byte(std::uint32_t n) const { return byte_[n]; }
  std::uint32_t depth(std::uint32_t n) const { return depth_[n]; }
  std::uint32_t subtree_end(std::uint32_t n) const { return subtree_end_[n]; }
  /// Tokens whose bytes end exactly at node n.
  const std::int32_t* tokens_begin(std::uint32_t n) const { return toks_.data() + tok_begin_[n]; }
  const std::int32_t* tokens_end(std::uint32_t n) const { return toks_.data() + tok_begin_[n + 1]; }
  /// Set the bits of the tokens ending exactly at node n in a dense mask. Why not a loop over
  /// tokens_begin..tokens_end: about half the nodes of a real trie hold one token and the rest
  /// none, in no pattern a branch predictor can learn, so the loop's trip count mispredicts on
  /// most nodes and that, not the automaton step, was most of a whole-vocabulary walk's time.
  /// Here the common case (at most one token) is one unconditional read and an OR of 0 or 1
  /// shifted into place; toks_ ends with a sentinel so the read is in bounds at a tokenless
  /// last node.
  void set_token_bits(std::uint32_t n, std::uint32_t* words) const {
    const std::uint32_t b = tok_begin_[n], e = tok_begin_[n + 1];
    if (e - b <= 1) {
      const std::int32_t t = toks_[b];
      words[static_cast<std::size_t>(t) >> 5] |= (e - b) << (t & 31);
      return;
    }
    for (std::uint32_t k = b; k < e; ++k) words[static_cast<std::size_t>(toks_[k]) >> 5] |= 1u << (toks_[k] & 31);
  }
  std::uint32_t max_depth() const { return max_depth_; }
  /// Depth of the deepest node holding a token in n's subtree (n included; 0 for none).
  std::uint32_t max_token_depth(std::uint32_t n) const { return max_token_depth_[n]; }
  std::size_t memory_bytes() const;

 private:
  std::vector<std::uint8_t> byte_;
  std::vector<std::uint32_t> depth_;
  std::vector<std::uint32_t> subtree_end_;
  std::vector<std::uint32_t> tok_begin_;  // num_nodes + 1
  std::vector<std::int32_t> toks_;  // ends with one sentinel 0 (see set_token_bits)
  std::vector<std::uint32_t> max_token_depth_;
  std::uint32_t max_depth_ = 0;
};

class Vocabulary {
 public:
  /// Throws TokenizerError for ids out of range or a width smaller than the vocabulary.
  Vocabulary(std::vector<std::string> tokens, const std::vector<std::int32_t>& special_ids,
             std::vector<std::int32_t> eos_ids, std::uint32_t width);

  std::uint32_t size() const { return static_cast<std::uint32_t>(tokens_.size()); }
  /// Logits width: ids in [size, width) exist in the model but are never allowed.
  std::uint32_t width() const { return width_; }
  /// int32 words per bitmask row.
  std::uint32_t mask_words() const { return (width_ + 31) / 32; }
  const std::string& bytes(std::int32_t id) const { return tokens_[static_cast<std::size_t>(id)]; }
  bool is_special(std::int32_t id) const { return special_[static_cast<std::size_t>(id)] != 0; }
  bool is_eos(std::int32_t id) const;
  const std::vector<std::int32_t>& eos_ids() const { return eos_; }
  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::vector<std::uint8_t>& special_flags() const { return special_; }
  const TokenTrie& trie() const { return trie_; }
  /// 128-bit content fingerprint of the bytes, special flags, EOS ids and width (computed once,
  /// at construction): a compiled-grammar artifact records it to refuse loading against another
  /// vocabulary. Not cryptographic: it tells vocabularies apart, it does not resist forgery.
  const std::array<std::uint64_t, 2>& fingerprint() const { return fingerprint_; }
  /// Share depth D (see the header): at least 8, at most the longest token; the trie nodes
  /// with a token deeper than D below them are at most 1/16 of all nodes.
  std::uint32_t share_depth() const { return share_depth_; }
  /// The trie of the tokens longer than the share depth only: a small, contiguous copy of the
  /// paths a per-state long walk visits (cache-friendly, unlike those paths scattered through
  /// trie()). long_to_full maps its nodes deeper than the share depth to trie() nodes (with the
  /// same subtree of tokens there, as every token below such a node is long).
  const TokenTrie& long_trie() const { return long_trie_; }
  std::uint32_t long_to_full(std::uint32_t n) const { return long_to_full_[n]; }
  /// An object of the mask layer that lives as long as the vocabulary (the cross-grammar mask
  /// pool, mask_pool.hpp); the vocabulary only stores it. Created by `make` on first use.
  std::shared_ptr<void> attachment(std::shared_ptr<void> (*make)()) const {
    std::lock_guard<std::mutex> lock(*attach_mu_);
    if (!attachment_) attachment_ = make();
    return attachment_;
  }

 private:
  std::vector<std::string> tokens_;
  std::vector<std::uint8_t> special_;
  std::vector<std::int32_t> eos_;
  std::uint32_t width_;
  std::array<std::uint64_t, 2> fingerprint_{};
  TokenTrie trie_;
  std::uint32_t share_depth_ = 0;
  TokenTrie long_trie_;
  std::vector<std::uint32_t> long_to_full_;
  std::shared_ptr<std::mutex> attach_mu_ = std::make_shared<std::mutex>();
  mutable std::shared_ptr<void> attachment_;
};

}  // namespace corral
