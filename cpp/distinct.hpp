// distinct.hpp — groups of pairwise distinct items drawn from an unbounded language: JSON arrays
// of free strings or integers under `uniqueItems`.
//
// Grammar text: `D ::= %distinct{min,max}(sep; item)` (`{min,}` has no upper bound, no braces
// means `{1,}`) — one or more items separated by `sep`, at least `min` and at most `max` of
// them, no two equal as JSON values: strings compare after unescaping (`"a"` = `"\u0061"`),
// numbers by exact decimal value (`1` = `1.0` = `10e-1`), `true`/`false`/`null` by text, any
// other item by its exact text.
//
// Unlike `%unique` (unique.hpp: a finite set of values, one member each), the item language is
// one rule, so the values an array holds are only known from the text. Lowering
// (grammar_lower.cpp) writes D ::= V | D sep V (key 0) and V ::= item, V a nonterminal of its
// own: the parser sees where each item starts and ends.
//
// Parsing (earley.cpp): items of D's productions carry in `aux` an id in the parser's ValueSets
// (this file): the values of the items closed so far, as 128-bit hashes of their canonical
// form (memory: 32 bytes per closed item, plus the decoded text of counted items, below). When a V completes, the parser
// reads its text (the bytes of the sets between its origin and now, kept per set) and, in
// checking mode, refuses to advance D past a value it already holds; an item of V whose terminal
// can read no further byte is dropped, so a refused value leaves no live item behind. A D with
// `max` values does not start another; D closes only with at least `min`.
//
// Masks: the frontier masks are cached per lexical state and cannot know the text of an item, so
// the matcher computes them with checking OFF (the parser then counts items but compares
// nothing; the mask memo's signatures hash only the count) and then applies DistinctCorrection:
// every allowed token in which the parser could refuse a close (precomputed once per grammar
// from the vocabulary: a byte that closes an item where the token ends and the item can read
// nothing more, or a close followed in the token by a byte that may follow the item: a parse
// that used the close goes on with one) is replayed through the parser with checking ON, and
// dropped when the parser refuses it. A close the item can extend at the
// token's end is no refusal yet ("15" with 15 held may become "150"), so digit tokens inside an
// integer are not replayed. When the item language has, from every open item prefix,
// infinitely many values (a JSON string without maxLength/pattern/format: a character can
// always be appended; canonical integers without an upper bound), a refused close is the only
// way to a dead end. Items with finitely many values after some prefix are exact when the item
// is one quoted JSON string terminal whose language is closed under re-spelling (the j/c
// strings; item_values.hpp): the parser counts the values left after each state and also
// refuses a prefix whose every value the group holds, and a group holding every value starts
// no other item; the correction then replays every token that may open the next item into a
// dead prefix (a byte before an item, then one it starts with) and, per step, the tokens a walk of the vocabulary finds taking an
// open item into a dead prefix (only bytes that begin a held value: those groups keep each
// held value's decoded text). Numeric items that are canonical integers (a bounded range) are
// counted the same way (item_values.hpp), with their text as their value, and plain decimals
// have one value or infinitely many after each prefix (item_values.hpp finds the pinned ones).
// Which tokens the correction replays: those with a byte into an accepting state of an item
// followed by a byte that may follow the item (FOLLOW at the byte level: the separator, or
// what follows the group), those that end where the item is a sink, and those with a byte that
// may precede an item followed by one it may start with (a dead prefix opened mid-token).
// Other finite items (several terminals) may still reach a dead end; the JSON Schema converter writes `%distinct` only for exact items and with a
// finite max (grammar/json_schema/unique_items.py: at most SchemaOptions.max_unique_items),
// which bounds the memory.
// The keys a %keyed group remembers (keyed.hpp: `%key(...)`) are items of the same kind: their
// nonterminals are value nonterminals of the keyed group (value_group_of), their held values a
// ValueSets id inside the group's key set, and this correction replays the tokens that may
// close one; a key opened inside the token (after a value: `1,"a"`) and closed there is an
// open_close_ token, replayed whenever any value is held.
// Completions: distinct_completion repairs the parser's shortest completion wherever it would
// close a duplicate, by writing the smallest other allowed byte first (inside a string: a space).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "grammar.hpp"

namespace corral {

class EarleyParser;
class Vocabulary;
struct Item;
struct ItemValues;

/// 128-bit hash of one item's canonical value; {0, 0} is "unknown" (never equal to another).
struct ValueHash {
  std::uint64_t h1 = 0, h2 = 0;
  bool known() const { return (h1 | h2) != 0; }
  bool operator==(const ValueHash& o) const { return h1 == o.h1 && h2 == o.h2; }
};

/// The canonical value of one item's text (see the header comment for what compares equal);
/// `decoded` (optional): a string's UTF-8 after unescaping, or a number's text as written, appended.
ValueHash value_hash(std::string_view text, std::string* decoded = nullptr);

/// The parser's memory of distinct groups: persistent sets of value hashes (id 0: the empty
/// set), each an existing set plus one value. Ids stay valid until truncate()/clear().
struct ValueSets {
  struct Entry {
    std::uint32_t parent = 0, count = 0;
    ValueHash value;
    std::uint32_t text_end = 0;  // texts_ holds this entry's decoded text up to here (see text())
  };
  std::vector<Entry> entries{Entry{}};

  void clear() {
    entries.resize(1);
    texts_.clear();
    forget();
  }
  std::size_t size() const { return entries.size(); }
  /// Forget the sets created after size() was n (the caller drops every item that names them).
  void truncate(std::size_t n) {
    entries.resize(n);
    texts_.resize(entries.back().text_end);
    if (memo_set_ >= n) forget();
  }
  std::uint32_t count(std::uint32_t set) const { return entries[set].count; }
  /// Does `set` hold `v` (a known value)? O(count) for a small set; a large one is indexed once
  /// and then answers in O(1) while it is the set asked about (a mask's correction asks about
  /// the same open array for every token it replays).
  bool has(std::uint32_t set, const ValueHash& v) const;
  /// set + {v} (v may be unknown: counted, never matched). `text`: v's decoded text, kept for the items whose values are counted (item_values.hpp:
  /// the dead-prefix walk looks for held values that begin like an open item; at most the
  /// output's own length).
  std::uint32_t with(std::uint32_t set, const ValueHash& v, std::string_view text = {});
  /// The decoded text kept for the value entry `e` added (empty when none was kept).
  std::string_view text(std::uint32_t e) const {
    const std::uint32_t b = e == 0 ? 0 : entries[e - 1].text_end;
    return std::string_view(texts_).substr(b, entries[e].text_end - b);
  }
  /// What parser-state signatures hash: the count only (masks are computed with checking off).
  std::uint64_t signature(std::uint32_t set) const;

 private:
  struct HashOf {
    std::size_t operator()(const ValueHash& v) const { return static_cast<std::size_t>(v.h1 ^ (v.h2 * 0x9E3779B97F4A7C15ull)); }
  };
  void forget() const {
    memo_set_ = 0;
    memo_.clear();
  }
  // The values of one large set (memo_set_; 0: none), a cache: sets never change once made.
  std::string texts_;
  mutable std::uint32_t memo_set_ = 0;
  mutable std::unordered_set<ValueHash, HashOf> memo_;
};

/// Does every live state of `d` (reachable, and able to reach acceptance) have infinitely many
/// accepted continuations, i.e. reach a cycle of live states? Then no prefix of an item in that
/// language has only finitely many values, the condition under which a distinct group's mask is
/// exact (see the header comment). False for an empty or finite language. With `sinks_ok`,
/// accepting states that read nothing more are exempt (a quoted key: its closing quote ends it).
bool every_prefix_open_ended(const Dfa& d, bool sinks_ok = false);

/// The most remembered values of one group the parser accepts (LimitExceeded past it); the
/// converter only writes groups whose maxItems is at most this.
inline constexpr std::uint32_t kMaxDistinctItems = 4096;

/// Shortest-completion bookkeeping of a distinct group's item `aux` (values held; `pending` when
/// the item has yet to close its own value): the bytes of the items still needed to reach min,
/// and their text (`sep item` each, possibly equal values: distinct_completion repairs them).
std::uint64_t distinct_missing_cost(const Grammar& g, const KeyedGroup& kg, std::uint32_t have);
void append_distinct_missing(const Grammar& g, const KeyedGroup& kg, std::uint32_t have, const Dfa* const* dfas,
                             std::string& out, std::size_t cap);

/// The shortest completion of the parser's state with no duplicate value (the parser is left as
/// it was). Throws LimitExceeded past `cap` bytes.
std::string distinct_completion(EarleyParser& p, std::size_t cap);

/// The history-dependent part of a mask inside distinct groups (see the header comment).
class DistinctCorrection {
 public:
  /// Precomputes, per token, how many places it has where the parser could refuse a close.
  DistinctCorrection(const Grammar& g, const Dfa* const* dfas, const Vocabulary& vocab);
  /// Clear from `row` every allowed token the parser (in checking mode) refuses.
  /// Read-only: one correction is shared by a matcher's copies, which may run on several threads.
  void apply(EarleyParser& p, const Vocabulary& vocab, std::uint32_t* row) const;
  /// Per terminal, the value counts of the groups' items with finitely many values somewhere
  /// (item_values.hpp; null for the others): the parser's table (EarleyParser::set_item_values).
  const std::vector<const ItemValues*>& item_values() const { return table_; }

 private:
  // Tokens a dead item prefix could refuse, for an open item in `state` of `d` whose group holds
  // `held` values (text: the item's text so far), appended to `out` when allowed in `row`.
  void dead_prefix_tokens(EarleyParser& p, const Item& it, std::int32_t t, const Vocabulary& vocab,
                          const std::uint32_t* row, std::vector<std::int32_t>& out) const;

  std::vector<std::int32_t> one_;  // tokens with at least one place a close could be refused
  std::vector<std::int32_t> two_;  // ... with at least two (can close two items on their own)
  bool simple_ = true;             // every group's item rule reads terminals only (EarleyParser::open_values)
  bool keys_ = false;              // some keyed group remembers its undeclared keys (keyed.hpp)
  bool keys_only_ = false;         // ... and no %distinct group exists
  std::vector<bool> is_two_;       // per token: in two_
  std::vector<std::int32_t> open_close_;  // ... tokens that may open such a key and close it
  // ... and per such token, the values of the keys it may open and close (the text from a
  // quote that may open a key to the next unescaped quote: a JSON string key ends there)
  std::vector<std::vector<ValueHash>> open_close_keys_;
  std::vector<std::unique_ptr<ItemValues>> owned_;
  std::vector<const ItemValues*> table_;  // per terminal (see item_values())
  bool counted_ = false;                  // some item has finitely many values somewhere
};

}  // namespace corral
