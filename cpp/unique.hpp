// unique.hpp — groups of distinct items with count bounds: JSON arrays under `uniqueItems`.
//
// Grammar text: `U ::= %unique{min,max}(sep; v0, v1, ...)` (the `{...}` part is optional:
// `{min,}` has no upper bound, no braces means `{1,}`) — one or more of the items vI separated
// by `sep`, in any order, each at most once, at least `min` and at most `max` of them. Each vI
// is the language of ONE value: the items' languages must be pairwise disjoint (the JSON
// Schema converter writes one member per distinct value of a finite item set, by JSON equality:
// `1` and `1.0` are one value, `"a"` and `"\u0061"` too, so all spellings of a value are in one
// member), which makes the set of items a text holds a function of the text.
//
// Engine: a `%unique` group IS a keyed member group (keyed.hpp) with no required keys, no
// undeclared-key member, and count bounds (KeyedGroup::min_count/max_count). The same 32-bit
// per-item id of an interned key set (KeySets) remembers the items closed so far; this file adds
// the count rules, applied in earley.cpp:
//  * an item of a member production whose set already holds `max` keys is never created (so no
//    mask allows an item past maxItems), and a member already in the set is never started
//    (keyed.hpp: no mask allows a duplicate item);
//  * a completed group lets its parent advance only when its set holds at least `min` keys;
//  * shortest completions append the cheapest members still absent (cheap_order) until `min`.
// The same rules, in keyed.cpp (admits, may_close, missing_members), count the members of a
// `%keyed{min,max}` group, whose undeclared members are counted too (keyed.hpp).
// Exactness of masks (the parser-set invariant of earley.hpp): from any live item with set S
// (|S| <= max) adding key j ∉ S, the item completes to S ∪ {j} (size <= max), and if that is
// below `min` there are at least min - |S ∪ {j}| absent members (min <= n), each can be
// appended (min <= max), so every live item can still complete — no dead ends.
// Bounds: a set is a bitset of n_keys bits (the converter caps n at SchemaOptions'
// max_unique_items); the KeySets table grows by at most one set per member completion.
#pragma once

#include <cstdint>
#include <string>

#include "grammar.hpp"
#include "keyed.hpp"

namespace corral {

/// Number of keys in interned set `set`.
std::uint32_t key_count(const KeySets& ks, std::uint32_t set);

/// Check the count bounds of every keyed group and derive cheap_order; throws CompileError on an
/// inconsistent group (min > max, more required members than max, min more than the members
/// that can be written). Called by Grammar::finalize after finalize_keyed.
void finalize_unique(Grammar& g);

}  // namespace corral
