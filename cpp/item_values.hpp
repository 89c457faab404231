// item_values.hpp — how many values a distinct group's string item can still become, and
// whether the group already holds every one of them (distinct.hpp: dead prefixes).
//
// In:  the DFA of a distinct group's item terminal. Out: ItemValues — per DFA state, the
//      number of distinct JSON values (decoded strings) its completions spell, capped.
// Why: a distinct group refuses the close of a value it holds. For an item with finitely many
// completions (`maxLength`, `format: date`, `^[ab]$`) that is not enough: after `"ab` with
// maxLength 2 and "ab" held, the only continuation is the refused closing quote. So the parser
// also refuses to enter an item prefix all of whose completions the group holds (prefix_dead),
// and a group that holds every value of its item language starts no other item (`total`).
//
// Which automata: a JSON string, quote to quote, whose language is closed under re-spelling
// (every value it accepts in some spelling it also accepts in its canonical one: true of the
// `j` and `c` strings of the converters). analyse_item_values checks the shape: from the start
// state a byte-level JSON string decoder (contexts: before the opening quote, between
// characters, inside a raw UTF-8 character, inside an escape, inside a surrogate pair) gives
// every state exactly one context, and only the closing quote leads to acceptance. Otherwise
// `ok` is false and the group is exact only for items with infinitely many values after every
// prefix (distinct.hpp), as before.
//
// Counting: distinct values are distinct canonical spellings (json.dumps(ensure_ascii=False):
// raw UTF-8 except `"` `\` and controls, which take `\"` `\\` `\b` `\f` `\n` `\r` `\t` or
// `\u00xx`). From a state between characters, count = [closes here] + the counts after each
// raw character byte path + after each of the 34 canonical escapes; a state that reaches a cycle
// has infinitely many (capped). Computed once, by Kahn's algorithm over the states between and
// inside raw characters (a cycle leaves its states unprocessed: capped). A state inside an escape
// (the text so far ends in `\`, `\u00`, ...) gets a lower bound: the count after one way of
// finishing the character.
// Numeric items (`numeric`): an automaton whose every string is a canonical integer
// (-?(0|[1-9][0-9]*), no -0: the JSON Schema converter's bounded integers, e.g. 1..1000 or
// minimum -20), checked on its product with a canonical-integer decoder. Distinct strings are
// then distinct values, so a state's count is [accepting] + the counts after each byte. Unlike a
// string, such an item is a value in the middle of its text ("1" under maximum 19 may still
// become 10..19), so the parser also asks whether the item may go on (`strict`: every value
// after the state except the one it spells now is held: then the item can only close).
// Decimal items (`decimal`, also `numeric`): plain decimals -?(0|[1-9][0-9]*)(\.[0-9]+)?, the
// converter's numbers in a unique array (written without exponents), compared as exact
// decimals. A prefix then has one value or infinitely many: the converter's ranges are
// intervals and decimals are dense, so two values imply every decimal between them. One value
// is a prefix pinned by a bound ("5" under maximum 5: only 5, 5.0, 5.00..; "-" under minimum
// 0: only -0..) or a range of one value. Per state and decoder context (start, after '-', in
// the integer digits, in the fraction), `single` says whether every live path stays within
// the spellings of the value its shortest completion gives; count is 1 there, else capped;
// the check reads the text's context and looks that value up. A closing item and its
// continuations have the same value, so `strict` changes nothing.
// Checking (prefix_dead): only where the count is at most the number of values held, by
// enumerating the completions' values (at most that many) and looking each up; an enumeration
// stops at the first value not held.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfa.hpp"
#include "distinct.hpp"

namespace corral {

struct ItemValues {
  bool ok = false;   // the automaton is a JSON string this analysis understands
  std::uint32_t cap = 0;  // counts are capped: cap means "cap or more" (maybe infinitely many)
  std::vector<std::uint8_t> ctx;      // decoder context per state (see item_values.cpp)
  std::vector<std::uint32_t> count;   // values completable from the state (escape states: a lower bound)
  std::vector<std::uint32_t> dist;    // bytes from the state to the nearest one with count <= small
  std::uint32_t small = 0;            // the threshold dist was computed for
  std::uint32_t total = 0;            // values of the whole language (capped)
  bool finite_somewhere = false;      // some live state has count < cap (else nothing to check)
  bool numeric = false;               // a numeric item (canonical integers or decimals), not a JSON string
  bool decimal = false;               // ... of plain decimals (then count is 1 or cap: `single`)
  std::vector<std::uint8_t> single;   // decimals: per state, the decoder contexts in which it has one value
  std::vector<std::string> shortest;  // decimals: per state, a shortest completion

  /// Might the item be a dead end in `state` for a group holding `held` values (`strict`: not
  /// counting the value a numeric item spells in `state`)?
  bool maybe_dead(std::int32_t state, std::uint32_t held, bool strict = false) const {
    const std::uint32_t n = count[static_cast<std::size_t>(state)];
    return held > 0 && n < cap && n - (strict && n > 0 && accepts(state) ? 1 : 0) <= held;
  }
  /// Does the (numeric) item spell a value in `state`?
  bool accepts(std::int32_t state) const;
  /// Is `state` the closed item (after the closing quote)?
  bool closed(std::int32_t state) const;
  /// Bytes a step from `from` to `to` adds to the value's length, at least: 1 for a raw
  /// byte, 1 for the end of an escape (which spells 1 to 4 bytes), else 0.
  std::uint32_t adds(std::int32_t from, std::int32_t to) const;
};

/// The analysis (see the header comment); `small`: the most values a group using the item may
/// hold while the item is open (for `dist`).
ItemValues analyse_item_values(const Dfa& d, std::uint32_t cap, std::uint32_t small);

/// Does every one of `sets` (ValueSets ids; non-empty) hold the value of every completion of the
/// item whose text so far is `text` (from its opening quote, or empty) in `state`? `strict`
/// (numeric items): every completion but the value `text` spells itself. `text` is used as
/// scratch and left as it was.
bool prefix_dead(const Dfa& d, const ItemValues& iv, std::int32_t state, std::string& text, const ValueSets& values,
                 const std::vector<std::uint32_t>& sets, bool strict = false);

}  // namespace corral
