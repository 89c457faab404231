// keyed.hpp — keyed member groups: JSON object members in any order, each key at most once.
//
// Grammar text: `K ::= %keyed{min,max}(sep; m0, !m1, ^{0} m2; extra)` — one or more members
// separated by `sep`; mI are the declared members (key index I = position, `!` = required,
// `^{i,j}` = the members that must be present when this one is: dependentRequired), `extra`
// the member for undeclared keys (optional part), `{min,max}` (optional) bounds the number of
// members, undeclared ones included. The language: every sequence m_{i1} sep m_{i2} ... (extra
// anywhere, any number of times) whose declared keys are pairwise distinct and include every
// required one and every dependency of each present one, with between min and max members.
// Members must be non-empty and start with distinct keys (the JSON Schema converter guarantees
// it: each member is `"name" : value`, the extra key class excludes the declared names), so the
// set of keys a member list contains is a function of its text. The text parser closes
// `required` under the dependencies (a required key's dependencies are required). A group with
// dependencies and a maximum count knows, per key, the keys its presence brings (`closure`):
// the dependency-closed sets are the unions of those. With an undeclared-key member, which can
// pad any set up to min_count, a set of keys fits when its closure (with the required keys)
// and the undeclared members seen have at most max_count members; without one, whether some
// dependency-closed superset has between min_count and max_count members is a subset-union
// question, answered once per group by a table over the subsets of its keys (`fits`, at most
// kMaxFitKeys keys: 8 KiB; a group past that is refused, and the JSON Schema converter keeps
// schema order there).
//
// Lowering (grammar_lower.cpp) writes, per member j (and the extra member, key kExtraKey):
//     K ::= m_j            (key j)        K ::= K sep m_j      (key j)
// and, when some key is required, a count binds or a key has dependencies, one kMinOnly
// production `K ::= m_r1 sep m_r2 ...` (a member list the group accepts: the required members,
// then members up to min) that only shortest-string tables read; the others are then
// kParseOnly. That is 2n+1 productions for n declared keys — linear, not a permutation
// automaton.
//
// Parsing (earley.cpp): every Earley item carries `aux`, an id of a set of seen keys interned
// in the parser's KeySets (this file). An item of a production of K holds the keys of the K it
// extends; completing it yields aux ∪ {key}; an item of a production with key j is never added
// when its aux holds j (no duplicate key can be started, so no mask allows one), nor, under a
// maximum, when the members it would make plus the required ones still missing exceed max
// (`admits`, dependencies included: see above); a production outside K advances past a
// completed K only when that K's keys include every required one and every dependency of each
// key among them, and count at least min members (`may_close`). Other nonterminals pass aux
// through unchanged. A counted group with an undeclared-key member keeps the number of
// undeclared members as a 32-bit counter in the set's bits from n_keys on (stopping at min
// when there is no max). Undeclared members are counted as written: two with the same key
// count twice unless the group remembers their keys (below; the JSON Schema converter only
// writes bounds where counting cannot make a mask wrong).
//
// Remembered undeclared keys: `%key(K)` inside the undeclared member (`%keyed{3,}(sep; m0;
// %key(K) ":" v)`, one per alternative) makes K a nonterminal of its own (KeyedGroup::key_nts,
// each read right inside the group's undeclared-member productions). When a key completes, the
// parser reads its text (as a %distinct item's, distinct.hpp: JSON strings compare after
// unescaping) and refuses it when the group holds it; the held keys are a ValueSets id kept in
// the key set's bits from n_keys + 32, and parser-state signatures hash the set without it
// (masks are computed with value checks off and corrected after, as for %distinct groups: the
// correction replays tokens that may close a key, and those that may open one after a value
// and close it). A repeated key must always have another way on, so each K is one terminal
// with infinitely many values whose every prefix but a closed key has infinitely many
// continuations, or whose values item_values.hpp counts (then a prefix whose every completion
// the group holds is refused, as for a %distinct item: `"x\n` with "x\n" held, the one final
// newline a `$`-anchored pattern allows); checked, CompileError otherwise.
//
// Why it stays bounded: the grammar is linear in the keys; a parser set holds, per item, one
// extra 32-bit id; the KeySets table grows by at most one set per member completion the parser
// performs (each is an existing set plus one key or one more counted member, interned so equal
// sets share an id) and is cleared with the parser. Sets are hashed by content for the mask
// memo, so equal states share masks across matchers.
//
// Exactness of masks: every live item can still complete — a member j ∉ aux can always be
// finished, and the required keys and dependencies not yet seen can always be appended (they
// are declared members, absent, and without a maximum the members that reach min may bring
// theirs along); under a maximum, `admits` keeps room for the missing required members and the
// dependencies of the present ones, and min <= max members can always be reached one member at
// a time (there are at least min members to write, or undeclared ones; with dependencies and no
// undeclared member, `fits` says a closed superset in range exists, and each of its keys
// missing is a step that keeps one) —
// so "the parser set is non-empty" stays equivalent to "the text is a prefix of a sentence",
// which is what the mask computation relies on. Shortest completions append exactly those
// members (`missing_members`).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar.hpp"

namespace corral {

/// The matcher's memory of keyed groups: interned sets of key indices (id 0: the empty set).
/// All of it is plain data (a snapshot can copy `words`/`hash` and rebuild `index`).
struct KeySets {
  /// Per id: the set as 64-bit words with trailing zero words trimmed (canonical).
  std::vector<std::vector<std::uint64_t>> words{{}};
  /// Per id: a content hash (0 for the empty set), used in parser-state signatures.
  std::vector<std::uint64_t> hash{0};
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> index;

  void clear();
  bool has(std::uint32_t set, std::uint32_t key) const;
  bool has_all(std::uint32_t set, const std::vector<std::uint32_t>& keys) const;
  /// set ∪ {key}, interned.
  std::uint32_t with(std::uint32_t set, std::uint32_t key);
  /// Number of keys below `limit` in the set.
  std::uint32_t count_below(std::uint32_t set, std::uint32_t limit) const;
  /// The 32-bit counter stored in bits [at, at + 32) (counted groups: undeclared members).
  std::uint32_t counter(std::uint32_t set, std::uint32_t at) const;
  /// The set with that counter set to `value`, interned.
  std::uint32_t with_counter(std::uint32_t set, std::uint32_t at, std::uint32_t value);
  /// The content hash of the set with the counter at `at` cleared (0 for an empty rest).
  std::uint64_t hash_without_counter(std::uint32_t set, std::uint32_t at) const;

 private:
  std::uint32_t intern(std::vector<std::uint64_t> w);
};

/// Does the group have count bounds beyond "one or more, each at most once"?
inline bool has_count_bounds(const KeyedGroup& kg) { return kg.min_count > 1 || kg.max_count != 0; }

/// Does the group count its undeclared members (count bounds and an undeclared-key member)?
/// Their number is then a counter above the declared keys' bits (KeySets::counter at n_keys).
inline bool counts_extras(const KeyedGroup& kg) { return has_count_bounds(kg) && kg.extra_rec_prod >= 0; }

/// Members of a (non-distinct) group's set: its declared keys plus its counted undeclared ones.
std::uint32_t member_count(const KeyedGroup& kg, const KeySets& ks, std::uint32_t set);

/// The set after an undeclared member completes (unchanged unless the group counts them; the
/// counter stops at min_count when there is no maximum, so the sets stay few).
std::uint32_t with_extra(const KeyedGroup& kg, KeySets& ks, std::uint32_t set);

/// May an item that adds `key` (a declared index or kExtraKey) to a group whose set is `set`
/// exist? No when the key is already in the set, or when the members after it plus the required
/// ones and dependencies still missing would exceed max_count, or (without undeclared members)
/// no dependency-closed superset reaches min_count within it: then no completion exists.
bool admits(const KeyedGroup& kg, const KeySets& ks, std::uint32_t set, std::int32_t key);

/// Most declared keys of a group with dependencies, a maximum count, a binding minimum and no
/// undeclared-key member (its `fits` table has one bit per subset of the keys).
inline constexpr std::uint32_t kMaxFitKeys = 16;

/// Derive `closure` and `fits` of a group with dependencies and a maximum count (keyed.hpp);
/// `writable[j]`: member j can be written (a closed set holding another is never completed).
/// Throws CompileError when no member list fits the group at all, or when `fits` is needed
/// for more than kMaxFitKeys keys.
void derive_fit_tables(KeyedGroup& kg, bool has_extra, const std::vector<char>& writable, const std::string& name);

/// Declared keys (ascending) of a member list a group with dependencies and a maximum count
/// may close with, from the empty set: the required keys, then (in key order) members with
/// their dependencies up to min_count while some completion still fits, the rest of min being
/// undeclared members (derive_fit_tables must have run). Used for the min-only production.
std::vector<std::uint32_t> fitting_member_list(const KeyedGroup& kg, bool has_extra);

/// May the group close with set `set`: every required key, every dependency of a present key,
/// and at least min_count members?
bool may_close(const KeyedGroup& kg, const KeySets& ks, std::uint32_t set);

/// The members the shortest completion of a group item (keys `set`, adding `key` when it is a
/// declared index or kExtraKey) appends before the group may close, as the group's recursive
/// productions (`nt ::= nt sep m`, read from symbol 1 on): the required keys and the
/// dependencies still missing, then the cheapest other members up to min_count.
void missing_members(const KeyedGroup& kg, const KeySets& ks, std::uint32_t set, std::int32_t key,
                     std::vector<std::int32_t>& out);

/// Derive the keyed tables of a grammar (group_of, rec_prod) and check their consistency;
/// throws CompileError on an inconsistent grammar (e.g. a corrupted artifact). Called by
/// Grammar::finalize after productions are final.
void finalize_keyed(Grammar& g);

}  // namespace corral
