// earley.cpp — see earley.hpp for the algorithm and invariants.
#include "earley.hpp"

#include <algorithm>
#include <limits>

#include "unique.hpp"

namespace corral {
namespace {
constexpr std::uint64_t kInf = std::numeric_limits<std::uint64_t>::max() / 4;

inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

bool no_successor(const Dfa& d, std::int32_t state) {
  for (std::uint32_t c = 0; c < d.num_classes(); ++c)
    if (d.next_by_class(state, c) >= 0) return false;
  return true;
}

inline std::uint64_t mix(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::int32_t d) {
  std::uint64_t h = (static_cast<std::uint64_t>(a) << 32 | b) * 0x9E3779B97F4A7C15ull;
  h ^= (static_cast<std::uint64_t>(c) << 32 | static_cast<std::uint32_t>(d)) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}
}  // namespace

EarleyParser::EarleyParser(const Grammar& g, const Dfa* const* dfas, std::uint32_t max_items)
    : g_(&g), dfas_(dfas), max_items_(max_items) {
  reset();
}

void EarleyParser::reset() {
  items_.clear();
  set_start_.clear();
  set_flags_.clear();
  wait_sig_.clear();
  costs_.clear();
  keys_.clear();
  values_.clear();
  set_byte_.clear();
  pending_byte_ = -1;
  open_set();
  add(0, 0, 0, -1);
  bool ok = close_set();
  CORRAL_CHECK(ok, "initial Earley set is empty");
}

void EarleyParser::pop_to(std::size_t n) {
  CORRAL_CHECK(n >= 1 && n <= set_start_.size(), "pop_to out of range");
  if (n < set_start_.size()) items_.resize(set_start_[n]);
  set_start_.resize(n);
  set_flags_.resize(n);
  set_byte_.resize(n);
  wait_sig_.resize(n);
  if (costs_.size() > n) costs_.resize(n);
}

void EarleyParser::open_set() {
  set_start_.push_back(items_.size());
  set_flags_.push_back(0);
  set_byte_.push_back(pending_byte_);
  pending_byte_ = -1;
  refused_ = false;
  if (++gen_ == 0) {  // generation counter wrapped: really clear
    std::fill(table_gen_.begin(), table_gen_.end(), 0);
    gen_ = 1;
  }
  table_count_ = 0;
  if (table_idx_.empty()) {
    table_idx_.assign(64, 0);
    table_gen_.assign(64, 0);
  }
}

void EarleyParser::add(std::uint32_t prod, std::uint32_t dot, std::uint32_t origin, std::int32_t dstate,
                       std::uint32_t aux) {
  // Keyed groups: an item that would add a key its group has already seen is never created, so
  // no byte (and no token) can start a duplicate key (keyed.hpp); nor one that would leave a
  // counted group no room for its required members within max_count (keyed.hpp, unique.hpp).
  const std::int32_t key = g_->productions[prod].key;
  if (key != kNoKey && !distinct_group(prod)) {
    if (key >= 0 && aux != 0 && keys_.has(aux, static_cast<std::uint32_t>(key))) return;
    const KeyedGroup& kg = g_->keyed[static_cast<std::size_t>(g_->group_of[static_cast<std::size_t>(g_->productions[prod].lhs)])];
    if (kg.max_count != 0 && !admits(kg, keys_, aux, key)) return;
  }
  // Normalise the DFA state: items whose next symbol is a terminal carry one (the start state
  // when just predicted or advanced); all others carry -1.
  std::uint32_t pos = g_->rhs_begin[prod] + dot;
  if (pos < g_->rhs_begin[prod + 1] && g_->rhs_flat[pos].is_terminal()) {
    const std::int32_t ti = g_->rhs_flat[pos].index();
    const Terminal& t = g_->terminals[static_cast<std::size_t>(ti)];
    if (t.is_token) {
      dstate = -1;  // matched by push_token, never by bytes
    } else {
      if (t.is_slot) {
        set_flags_.back() |= kSlotFlag;
        slot_seen_ = true;
      }
      if (dstate < 0) dstate = dfa(ti).start();
    }
  } else {
    dstate = -1;
  }
  std::size_t mask = table_idx_.size() - 1;
  std::size_t h = static_cast<std::size_t>(mix(prod, dot, origin, dstate) ^ mix64(aux)) & mask;
  const std::size_t base = set_start_.back();
  while (table_gen_[h] == gen_) {
    const Item& o = items_[base + table_idx_[h]];
    if (o.prod == prod && o.dot == dot && o.origin == origin && o.dstate == dstate && o.aux == aux) return;
    h = (h + 1) & mask;
  }
  const std::size_t count = items_.size() - base;
  if (count >= max_items_)
    throw LimitExceeded("max_items_per_set", count + 1, max_items_,
                        "the grammar is too ambiguous here: one parser step needs too many items");
  table_gen_[h] = gen_;
  table_idx_[h] = static_cast<std::uint32_t>(count);
  items_.push_back(Item{prod, dot, origin, dstate, aux});
  if (prod == 0 && dot == 1 && origin == 0) set_flags_.back() |= kAcceptFlag;
  if (++table_count_ * 2 > table_idx_.size()) {
    // Grow and re-insert this set's items.
    std::size_t cap = table_idx_.size() * 2;
    table_idx_.assign(cap, 0);
    table_gen_.assign(cap, 0);
    gen_ = 1;
    for (std::size_t i = base; i < items_.size(); ++i) {
      const Item& it = items_[i];
      std::size_t k = static_cast<std::size_t>(mix(it.prod, it.dot, it.origin, it.dstate) ^ mix64(it.aux)) & (cap - 1);
      while (table_gen_[k] == gen_) k = (k + 1) & (cap - 1);
      table_gen_[k] = gen_;
      table_idx_[k] = static_cast<std::uint32_t>(i - base);
    }
  }
}

bool EarleyParser::close_set() {
  const std::size_t k = set_start_.size() - 1;
  const std::size_t begin = set_start_.back();
  if (items_.size() == begin) {
    set_start_.pop_back();
    set_flags_.pop_back();
    set_byte_.pop_back();
    return false;
  }
  for (std::size_t i = begin; i < items_.size(); ++i) {
    const Item it = items_[i];  // copy: add() may reallocate
    const std::uint32_t pos = g_->rhs_begin[it.prod] + it.dot;
    if (pos >= g_->rhs_begin[it.prod + 1]) {
      // Completed: advance every item of the origin set waiting for this lhs. Origin == k only
      // for empty derivations, which prediction already advanced (Aycock–Horspool).
      if (it.origin == k) continue;
      const std::int32_t lhs = g_->productions[it.prod].lhs;
      // Keyed groups: a completed group passes its keys (its items' set plus the key this
      // production adds) to the group's own recursion, and lets any other production advance
      // past it only when every required key is among them (keyed.hpp).
      const std::int32_t grp = g_->group_of[static_cast<std::size_t>(lhs)];
      const std::uint32_t out = grp >= 0 ? out_keys(it) : 0;
      // Counted groups (unique.hpp, keyed.hpp) also need min_count members, and a key with
      // dependencies needs them (keyed.hpp).
      const KeyedGroup* kg = grp >= 0 ? &g_->keyed[static_cast<std::size_t>(grp)] : nullptr;
      const bool distinct = kg && kg->distinct();
      const std::uint32_t have = distinct ? values_.count(out) : 0;
      const bool closes = !kg || (distinct ? kg->min_count <= 1 || have >= kg->min_count : may_close(*kg, keys_, out));
      // Distinct groups (distinct.hpp): a group with max_count values starts no other; an item
      // V that completes advances its group only past a value the group does not hold yet.
      // A group holding every value its item can take (item_values.hpp) starts no other either.
      const bool more = !distinct || ((kg->max_count == 0 || have < kg->max_count) && !exhausted(*kg, have));
      const std::int32_t vg = g_->value_group_of[static_cast<std::size_t>(lhs)];
      ValueHash value;
      std::string& value_text = scratch_text_;
      value_text.clear();
      // (the decoded text is kept only for items whose values are counted: item_values.hpp)
      const bool keep = vg >= 0 && item_values_ != nullptr && g_->rhs_len(it.prod) == 1 &&
                        g_->rhs_flat[g_->rhs_begin[it.prod]].is_terminal() &&
                        item_values(g_->rhs_flat[g_->rhs_begin[it.prod]].index()) != nullptr;
      if (vg >= 0 && check_values_) value = item_value(it.origin, keep ? &value_text : nullptr);
      const std::size_t ob = set_start_[it.origin], oe = set_start_[it.origin + 1];
      for (std::size_t j = ob; j < oe; ++j) {
        const Item& p = items_[j];
        const std::uint32_t ppos = g_->rhs_begin[p.prod] + p.dot;
        if (ppos < g_->rhs_begin[p.prod + 1]) {
          Symbol s = g_->rhs_flat[ppos];
          if (!s.is_terminal() && s.index() == lhs) {
            const Item pc = p;
            if (vg >= 0 && g_->productions[pc.prod].lhs == g_->keyed[static_cast<std::size_t>(vg)].nt) {
              // A distinct group's values are its aux; a keyed group's undeclared keys are a
              // ValueSets id in its key set (keyed.hpp).
              const KeyedGroup& vk = g_->keyed[static_cast<std::size_t>(vg)];
              const std::uint32_t held = vk.distinct() ? pc.aux : keys_.counter(pc.aux, vk.held_at());
              if (value.known() && values_.has(held, value)) {  // a duplicate: refused
                refused_ = true;
                continue;
              }
              if (values_.count(held) >= kMaxDistinctItems)
                throw LimitExceeded("max_distinct_items", values_.count(held) + 1, kMaxDistinctItems,
                                    vk.distinct() ? "a %distinct group holds too many items to remember"
                                                  : "an object has too many undeclared keys to remember");
              const std::uint32_t now = values_.with(held, value, value_text);
              add(pc.prod, pc.dot + 1, pc.origin, -1, vk.distinct() ? now : keys_.with_counter(pc.aux, vk.held_at(), now));
            } else if (grp < 0) {
              add(pc.prod, pc.dot + 1, pc.origin, -1, pc.aux);
            } else if (g_->productions[pc.prod].lhs == lhs) {
              if (more) add(pc.prod, pc.dot + 1, pc.origin, -1, out);  // K ::= K . sep m (dot was 0: aux 0)
            } else if (closes) {
              add(pc.prod, pc.dot + 1, pc.origin, -1, pc.aux);
            }
          }
        }
      }
      continue;
    }
    const Symbol s = g_->rhs_flat[pos];
    if (s.is_terminal()) {
      const Dfa& d = dfa(s.index());
      if (it.dstate == d.start() && d.matches_empty()) add(it.prod, it.dot + 1, it.origin, -1, it.aux);
      continue;
    }
    const auto nt = static_cast<std::size_t>(s.index());
    for (std::int32_t p : g_->by_lhs[nt]) add(static_cast<std::uint32_t>(p), 0, static_cast<std::uint32_t>(k), -1);
    if (g_->nullable[nt]) add(it.prod, it.dot + 1, it.origin, -1, it.aux);  // groups are never nullable
  }
  // A refused duplicate may leave only items that can never act again (completed ones): then
  // the text is no prefix of a sentence and the set must be empty, as the invariant says.
  if (refused_) {
    refused_ = false;
    if (!(set_flags_.back() & kAcceptFlag) && !can_act(begin)) {
      abandon_set();
      return false;
    }
  }
  // Signature of the items waiting on a nonterminal (see state_signature). Items are unique in
  // a set, so an order-independent sum of per-item hashes is canonical; an origin equal to this
  // set is hashed as a fixed "self" marker.
  std::uint64_t h1 = 0x243F6A8885A308D3ull, h2 = 0x13198A2E03707344ull;
  for (std::size_t i = begin; i < items_.size(); ++i) {
    const Item& it = items_[i];
    const std::uint32_t pos = g_->rhs_begin[it.prod] + it.dot;
    if (pos >= g_->rhs_begin[it.prod + 1] || g_->rhs_flat[pos].is_terminal()) continue;
    const auto o = it.origin == k ? std::pair<std::uint64_t, std::uint64_t>{0x5E1F, 0x5E1F} : wait_sig_[it.origin];
    const std::uint64_t base = (static_cast<std::uint64_t>(it.prod) << 32 | it.dot) ^ aux_hash(it);
    h1 += mix64(base ^ mix64(o.first));
    h2 += mix64(base * 0x9E3779B97F4A7C15ull ^ mix64(o.second + 0x632BE59BD9B4E019ull));
  }
  wait_sig_.push_back({mix64(h1), mix64(h2 ^ h1)});
  return true;
}

bool EarleyParser::open_values() const {
  // A distinct group's own items hold its values; a keyed group's count only once one of its
  // keys is open (an item of the key, below): elsewhere a key must first open inside the
  // token, which the correction's open_close_ tokens cover (distinct.hpp).
  auto holds = [&](const Item& it, bool keys) {
    if (it.aux == 0) return false;
    if (distinct_group(it.prod)) return values_.count(it.aux) > 0;
    const KeyedGroup* kg = keys ? key_group(it.prod) : nullptr;
    return kg != nullptr && values_.count(keys_.counter(it.aux, kg->held_at())) > 0;
  };
  for (std::size_t i = cur_begin(); i < cur_end(); ++i) {
    const Item& it = items_[i];
    if (holds(it, false)) return true;
    if (g_->value_group_of[static_cast<std::size_t>(g_->productions[it.prod].lhs)] < 0) continue;
    const std::size_t ob = set_start_[it.origin];
    const std::size_t oe = it.origin + 1 < set_start_.size() ? set_start_[it.origin + 1] : items_.size();
    for (std::size_t j = ob; j < oe; ++j)
      if (holds(items_[j], true)) return true;
  }
  return false;
}

bool EarleyParser::can_act(std::size_t begin) const {
  for (std::size_t i = begin; i < items_.size(); ++i) {
    const Item& it = items_[i];
    const std::int32_t t = scanning_terminal(it);
    if (t < 0) continue;
    if (g_->terminals[static_cast<std::size_t>(t)].is_token) return true;
    if (it.dstate >= 0 && !no_successor(dfa(t), it.dstate)) return true;
  }
  return false;
}

std::pair<std::uint64_t, std::uint64_t> EarleyParser::state_signature() const {
  const std::size_t k = set_start_.size() - 1;
  std::uint64_t h1 = wait_sig_[k].first ^ 0xA4093822299F31D0ull, h2 = wait_sig_[k].second;
  for (std::size_t i = cur_begin(); i < cur_end(); ++i) {
    const Item& it = items_[i];
    if (it.dstate < 0) {
      const std::int32_t t = scanning_terminal(it);
      if (t < 0 || !g_->terminals[static_cast<std::size_t>(t)].is_token) continue;  // cannot act again
    }
    const auto o = it.origin == k ? std::pair<std::uint64_t, std::uint64_t>{0x5E1F, 0x5E1F} : wait_sig_[it.origin];
    const std::uint64_t base = (static_cast<std::uint64_t>(it.prod) << 40) ^ (static_cast<std::uint64_t>(it.dot) << 20) ^
                               static_cast<std::uint32_t>(it.dstate) ^ mix64(aux_hash(it));
    h1 += mix64(base ^ mix64(o.first + 1));
    h2 += mix64(base * 0xC2B2AE3D27D4EB4Full ^ mix64(o.second + 7));
  }
  h1 += set_flags_.back() & kAcceptFlag;
  return {mix64(h1), mix64(h2 + h1)};
}

// Drop a set that is being built (a limit was hit mid-step): the parser is exactly as before it.
void EarleyParser::abandon_set() {
  items_.resize(set_start_.back());
  set_start_.pop_back();
  set_flags_.pop_back();
  set_byte_.pop_back();
}

bool EarleyParser::push_states(const std::int32_t* new_states) {
  const std::size_t b = cur_begin(), e = cur_end();
  open_set();
  try {
    for (std::size_t i = b; i < e; ++i) {
      const std::int32_t ns = new_states[i - b];
      if (ns < 0) continue;
      const Item it = items_[i];
      const std::int32_t t = scanning_terminal(it);
      // Items of a distinct group's item (distinct.hpp) whose terminal can read no further byte
      // are dropped: they could never act again, and when the value they close is refused as a
      // duplicate nothing must stay alive.
      const bool stuck = g_->value_group_of[static_cast<std::size_t>(g_->productions[it.prod].lhs)] >= 0 &&
                         dfa(t).accepting(ns) && no_successor(dfa(t), ns);
      // ... and so are those that would enter a prefix whose every value the group holds
      // (item_values.hpp; checking mode only: the cached masks leave it to the correction).
      // A numeric item in an accepting state ("1" under maximum 19) goes on only while some
      // value after it other than its own is free (its own is checked when it closes).
      const ItemValues* iv = check_values_ && !stuck ? item_values(t) : nullptr;
      const bool dead = iv != nullptr && (iv->numeric || !dfa(t).accepting(ns)) &&
                        dead_prefix(it, t, ns, scratch_text_, dfa(t).accepting(ns));
      if (dead) refused_ = true;
      if (!stuck && !dead) add(it.prod, it.dot, it.origin, ns, it.aux);
      if (dfa(t).accepting(ns)) add(it.prod, it.dot + 1, it.origin, -1, it.aux);
    }
    return close_set();
  } catch (...) {
    abandon_set();
    throw;
  }
}

bool EarleyParser::push_token(std::int32_t token_id) {
  const std::size_t b = cur_begin(), e = cur_end();
  bool any = false;
  for (std::size_t i = b; i < e && !any; ++i) {
    const std::int32_t t = scanning_terminal(items_[i]);
    any = t >= 0 && g_->terminals[static_cast<std::size_t>(t)].token_id == token_id;
  }
  if (!any) return false;
  open_set();
  try {
    for (std::size_t i = b; i < e; ++i) {
      const Item it = items_[i];
      const std::int32_t t = scanning_terminal(it);
      if (t >= 0 && g_->terminals[static_cast<std::size_t>(t)].token_id == token_id)
        add(it.prod, it.dot + 1, it.origin, -1, it.aux);
    }
    return close_set();
  } catch (...) {
    abandon_set();
    throw;
  }
}

void EarleyParser::expected_tokens(std::vector<std::int32_t>& out) const {
  for (std::size_t i = cur_begin(); i < cur_end(); ++i) {
    const std::int32_t t = scanning_terminal(items_[i]);
    if (t >= 0 && g_->terminals[static_cast<std::size_t>(t)].is_token)
      out.push_back(g_->terminals[static_cast<std::size_t>(t)].token_id);
  }
}

bool EarleyParser::push_byte(std::uint8_t byte) {
  const std::size_t b = cur_begin(), e = cur_end();
  scratch_states_.resize(e - b);
  bool any = false;
  for (std::size_t i = b; i < e; ++i) {
    const Item& it = items_[i];
    std::int32_t ns = -1;
    if (it.dstate >= 0) {
      const std::int32_t t = scanning_terminal(it);
      ns = dfa(t).next(it.dstate, byte);
    }
    scratch_states_[i - b] = ns;
    any = any || ns >= 0;
  }
  if (!any) return false;
  std::vector<std::int32_t> states;
  states.swap(scratch_states_);  // push_states may recurse into nothing, but keep it reentrant
  pending_byte_ = byte;  // the new set's byte (distinct groups read items' text from them)
  bool ok = push_states(states.data());
  states.swap(scratch_states_);
  return ok;
}

std::uint32_t EarleyParser::out_keys(const Item& it) {
  if (distinct_group(it.prod)) return it.aux;  // the item's value joined when its V completed
  const std::int32_t key = g_->productions[it.prod].key;
  if (key >= 0) return keys_.with(it.aux, static_cast<std::uint32_t>(key));
  if (key != kExtraKey) return it.aux;
  const KeyedGroup& kg = g_->keyed[static_cast<std::size_t>(g_->group_of[static_cast<std::size_t>(g_->productions[it.prod].lhs)])];
  return with_extra(kg, keys_, it.aux);
}

// The members an item of a keyed group's production still needs once it completes (required
// keys, dependencies, members up to min_count: keyed.cpp missing_members): each costs one more
// member (separator + member, a recursive production of the group from index 1). Zero for
// items outside groups. Never creates sets (const): the key the item adds is tested on its own.
std::uint64_t EarleyParser::missing_cost(const Item& it) const {
  const std::int32_t grp = g_->group_of[static_cast<std::size_t>(g_->productions[it.prod].lhs)];
  if (grp < 0) return 0;
  const KeyedGroup& kg = g_->keyed[static_cast<std::size_t>(grp)];
  if (kg.distinct()) return distinct_missing_cost(*g_, kg, distinct_have(it));
  std::vector<std::int32_t> prods;
  missing_members(kg, keys_, it.aux, g_->productions[it.prod].key, prods);
  std::uint64_t cost = 0;
  for (std::int32_t p : prods) cost = std::min(kInf, cost + g_->suffix_cost(static_cast<std::uint32_t>(p), 1));
  return cost;
}

void EarleyParser::append_missing(const Item& it, std::string& out, std::size_t cap) const {
  const std::int32_t grp = g_->group_of[static_cast<std::size_t>(g_->productions[it.prod].lhs)];
  if (grp < 0) return;
  const KeyedGroup& kg = g_->keyed[static_cast<std::size_t>(grp)];
  if (kg.distinct()) {
    append_distinct_missing(*g_, kg, distinct_have(it), dfas_, out, cap);
    return;
  }
  std::vector<std::int32_t> prods;
  missing_members(kg, keys_, it.aux, g_->productions[it.prod].key, prods);
  for (std::int32_t p : prods) {
    const auto q0 = static_cast<std::uint32_t>(p);
    for (std::uint32_t q = g_->rhs_begin[q0] + 1; q < g_->rhs_begin[q0 + 1]; ++q)
      g_->append_min_string(g_->rhs_flat[q], dfas_, out, cap);
  }
}

// Values a distinct group's item holds once it completes: its set, plus its own item when the
// dot is still before V (the last symbol of both productions).
std::uint32_t EarleyParser::distinct_have(const Item& it) const {
  return values_.count(it.aux) + (it.dot < g_->rhs_len(it.prod) ? 1 : 0);
}

ValueHash EarleyParser::item_value(std::uint32_t origin, std::string* decoded) const {
  const std::size_t k = set_start_.size() - 1;
  std::string text;
  for (std::size_t j = origin + 1; j <= k; ++j) {
    if (set_byte_[j] < 0) return ValueHash{};  // not known (a token, or a mask's jump)
    text.push_back(static_cast<char>(set_byte_[j]));
  }
  return value_hash(text, decoded);
}

bool EarleyParser::item_text(std::uint32_t origin, std::string& out) const {
  const std::size_t k = set_start_.size() - 1;
  for (std::size_t j = origin + 1; j <= k; ++j) {
    if (set_byte_[j] < 0) return false;
    out.push_back(static_cast<char>(set_byte_[j]));
  }
  return true;
}

void EarleyParser::waiting_value_sets(const Item& it, std::vector<std::uint32_t>& out) const {
  out.clear();
  const std::int32_t lhs = g_->productions[it.prod].lhs;
  const std::int32_t vg = g_->value_group_of[static_cast<std::size_t>(lhs)];
  if (vg < 0) return;
  const KeyedGroup& kg = g_->keyed[static_cast<std::size_t>(vg)];
  const std::int32_t group_nt = kg.nt;
  const std::size_t ob = set_start_[it.origin];
  const std::size_t oe = it.origin + 1 < set_start_.size() ? set_start_[it.origin + 1] : items_.size();
  for (std::size_t j = ob; j < oe; ++j) {
    const Item& p = items_[j];
    const std::uint32_t pos = g_->rhs_begin[p.prod] + p.dot;
    if (pos >= g_->rhs_begin[p.prod + 1] || g_->productions[p.prod].lhs != group_nt) continue;
    const Symbol s = g_->rhs_flat[pos];
    // (a keyed group's held keys are a ValueSets id inside its key set: keyed.hpp)
    if (!s.is_terminal() && s.index() == lhs) out.push_back(kg.distinct() ? p.aux : keys_.counter(p.aux, kg.held_at()));
  }
}

bool EarleyParser::dead_prefix(const Item& it, std::int32_t t, std::int32_t state, std::string& text, bool strict) const {
  const ItemValues* iv = item_values(t);
  if (iv == nullptr || iv->count[static_cast<std::size_t>(state)] >= iv->cap) return false;
  waiting_value_sets(it, scratch_sets_);
  if (scratch_sets_.empty()) return false;
  for (std::uint32_t set : scratch_sets_)
    if (!iv->maybe_dead(state, values_.count(set), strict)) return false;
  text.clear();
  if (!item_text(it.origin, text)) return false;
  return prefix_dead(dfa(t), *iv, state, text, values_, scratch_sets_, strict);
}

bool EarleyParser::exhausted(const KeyedGroup& kg, std::uint32_t have) const {
  if (item_values_ == nullptr || have == 0) return false;
  const auto& prods = g_->by_lhs[static_cast<std::size_t>(kg.value_nt)];
  if (prods.size() != 1 || g_->rhs_len(static_cast<std::uint32_t>(prods[0])) != 1) return false;
  const Symbol s = g_->rhs_flat[g_->rhs_begin[static_cast<std::uint32_t>(prods[0])]];
  if (!s.is_terminal()) return false;
  const ItemValues* iv = item_values(s.index());
  return iv != nullptr && iv->total < iv->cap && have >= iv->total;
}

std::array<std::uint64_t, 4> EarleyParser::next_bytes() const {
  std::array<std::uint64_t, 4> out{0, 0, 0, 0};
  for (std::size_t i = cur_begin(); i < cur_end(); ++i) {
    const Item& it = items_[i];
    if (it.dstate < 0) continue;
    const Dfa& d = dfa(scanning_terminal(it));
    for (int b = 0; b < 256; ++b)
      if (d.next(it.dstate, static_cast<std::uint8_t>(b)) >= 0) out[static_cast<std::size_t>(b >> 6)] |= 1ull << (b & 63);
  }
  return out;
}

// Cost of completing the whole parse after nonterminal `nt` completes with origin set j.
void EarleyParser::ensure_costs() {
  auto lookup = [](const std::vector<NtCost>& v, std::int32_t nt) -> const NtCost* {
    for (const auto& c : v)
      if (c.nt == nt) return &c;
    return nullptr;
  };
  while (costs_.size() < set_start_.size()) {
    const std::size_t j = costs_.size();
    const std::size_t b = set_start_[j];
    const std::size_t e = j + 1 < set_start_.size() ? set_start_[j + 1] : items_.size();
    std::vector<NtCost> cur;
    for (std::size_t i = b; i < e; ++i) {
      const Item& p = items_[i];
      const std::uint32_t pos = g_->rhs_begin[p.prod] + p.dot;
      if (pos >= g_->rhs_begin[p.prod + 1] || g_->rhs_flat[pos].is_terminal()) continue;
      const std::int32_t nt = g_->rhs_flat[pos].index();
      if (!lookup(cur, nt)) cur.push_back(NtCost{nt, kInf, 0});
    }
    // Bellman–Ford over this set's items (cycles only through items predicted in this set).
    for (std::size_t round = 0; round <= cur.size(); ++round) {
      bool changed = false;
      for (std::size_t i = b; i < e; ++i) {
        const Item& p = items_[i];
        const std::uint32_t pos = g_->rhs_begin[p.prod] + p.dot;
        if (pos >= g_->rhs_begin[p.prod + 1] || g_->rhs_flat[pos].is_terminal()) continue;
        const std::int32_t nt = g_->rhs_flat[pos].index();
        std::uint64_t parent = 0;
        if (p.prod != 0) {
          const std::int32_t lhs = g_->productions[p.prod].lhs;
          const NtCost* pc = p.origin < j ? lookup(costs_[p.origin], lhs) : lookup(cur, lhs);
          parent = pc ? std::min(kInf, pc->cost + missing_cost(p)) : kInf;
        }
        if (parent >= kInf) continue;
        const std::uint64_t total = std::min(kInf, g_->suffix_cost(p.prod, p.dot + 1) + parent);
        NtCost* c = const_cast<NtCost*>(lookup(cur, nt));
        if (total < c->cost) {
          c->cost = total;
          c->via = static_cast<std::uint32_t>(i);
          changed = true;
        }
      }
      if (!changed) break;
    }
    costs_.push_back(std::move(cur));
  }
}

std::string EarleyParser::shortest_completion(std::size_t cap) {
  ensure_costs();
  auto parent_cost = [&](const Item& it) -> std::uint64_t {
    if (it.prod == 0) return 0;
    const std::int32_t lhs = g_->productions[it.prod].lhs;
    for (const auto& c : costs_[it.origin])
      if (c.nt == lhs) return std::min(kInf, c.cost + missing_cost(it));
    return kInf;
  };
  std::uint64_t best = kInf;
  std::size_t best_i = 0;
  for (std::size_t i = cur_begin(); i < cur_end(); ++i) {
    const Item& it = items_[i];
    std::uint64_t own;
    if (it.dstate >= 0) {
      const Dfa& d = dfa(scanning_terminal(it));
      own = d.distance_to_accept(it.dstate) + g_->suffix_cost(it.prod, it.dot + 1);
    } else {
      own = g_->suffix_cost(it.prod, it.dot);
    }
    const std::uint64_t total = std::min(kInf, own + parent_cost(it));
    if (total < best) {
      best = total;
      best_i = i;
    }
  }
  CORRAL_CHECK(best < kInf, "no completion from a live parser state");
  if (best > cap)
    throw LimitExceeded("max_completion_bytes", best, cap, "the shortest completion is too long");
  std::string out;
  auto emit_rest = [&](const Item& it, std::uint32_t from) {
    const std::uint32_t b = g_->rhs_begin[it.prod], e = g_->rhs_begin[it.prod + 1];
    for (std::uint32_t p = b + from; p < e; ++p) g_->append_min_string(g_->rhs_flat[p], dfas_, out, cap);
  };
  Item it = items_[best_i];
  if (it.dstate >= 0) {
    out += dfa(scanning_terminal(it)).shortest_completion(it.dstate);
    emit_rest(it, it.dot + 1);
  } else {
    emit_rest(it, it.dot);
  }
  std::size_t guard = 0;
  while (it.prod != 0) {
    CORRAL_CHECK(++guard <= items_.size(), "cyclic completion chain");
    const std::int32_t lhs = g_->productions[it.prod].lhs;
    const NtCost* c = nullptr;
    for (const auto& x : costs_[it.origin])
      if (x.nt == lhs) c = &x;
    CORRAL_CHECK(c && c->cost < kInf, "broken completion chain");
    append_missing(it, out, cap);
    it = items_[c->via];
    emit_rest(it, it.dot + 1);
  }
  return out;
}

}  // namespace corral
