// slots.cpp — binding a skeleton's slots to per-request values (CompiledGrammar::bind).
//
// In:  a compiled skeleton (a grammar with `${name}` / `${name:json}` terminals) and, per slot
//      name, a list of distinct UTF-8 strings.
// Out: a binding: a CompiledGrammar sharing the skeleton's grammar, DFAs, vocabulary and caches,
//      with one DFA per slot terminal built straight from the values.
// Why no regex: the values are a finite set, and the trie of a sorted finite set is already a
//      DFA; Dfa::from_strings merges its equal suffixes in the same pass (minimal, so equal
//      remaining languages share one state and one mask-cache entry). The per-request cost is
//      linear in the values' bytes — no regex parsing, no NFA, no subset construction.
// Invariant: a slot's language is exactly its values, spelled as the terminal says: raw UTF-8
//      bytes, or a JSON string in the one spelling json.dumps(v, ensure_ascii=False) writes
//      (so decoded values are distinct iff their spellings are).
#include <algorithm>
#include <map>
#include <string_view>

#include "compiled_grammar.hpp"
#include "utf8.hpp"

namespace corral {
namespace {

// A value quoted in error messages: at most 40 bytes, cut at a character boundary.
std::string quoted(std::string_view v) {
  std::size_t n = std::min<std::size_t>(v.size(), 40);
  while (n < v.size() && n > 0 && (static_cast<unsigned char>(v[n]) & 0xC0) == 0x80) --n;
  return "'" + std::string(v.substr(0, n)) + (n < v.size() ? "...'" : "'");
}

// Appends the bytes of the UTF-8 character at v[i] (advancing i); false on invalid UTF-8
// (overlong forms, surrogates, truncation), which a slot value may never contain.
bool copy_char(std::string_view v, std::size_t& i, std::string* out) {
  const std::size_t from = i;
  std::uint32_t cp = 0;
  if (!utf8_decode(v, i, cp)) return false;
  if (out) out->append(v.data() + from, i - from);
  return true;
}

bool valid_utf8(std::string_view v) {
  for (std::size_t i = 0; i < v.size();) {
    if (static_cast<unsigned char>(v[i]) < 0x80) {
      ++i;
    } else if (!copy_char(v, i, nullptr)) {
      return false;
    }
  }
  return true;
}

// Appends `v` as a JSON string, quotes included, exactly as Python's
// json.dumps(v, ensure_ascii=False) writes it: `"` and `\` escaped, the short escapes
// \b \f \n \r \t, other controls as \u00xx in lower-case hex, everything else raw.
bool append_json_canonical(std::string& out, std::string_view v) {
  static const char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (std::size_t i = 0; i < v.size();) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c >= 0x80) {
      if (!copy_char(v, i, &out)) return false;
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
  return true;
}

// The value whose spelling is `spelled` (error messages name values as the caller wrote them).
std::string unspelled(std::string_view spelled, const std::vector<std::string>& values, SlotSpelling spelling) {
  if (spelling == SlotSpelling::Raw) return std::string(spelled);
  std::string tmp;
  for (const std::string& v : values) {
    tmp.clear();
    if (append_json_canonical(tmp, v) && tmp == spelled) return v;
  }
  return std::string(spelled);
}

[[noreturn]] void bad_value(const std::string& slot, const std::string& why) {
  throw SlotError(slot, "slot '" + slot + "': " + why);
}

// The spellings of one slot's values (views into `values` or into `buffer`), sorted; checks
// the values and the size limits on the way.
std::vector<std::string_view> spell_values(const std::string& name, const std::vector<std::string>& values,
                                           SlotSpelling spelling, const Limits& limits, std::string& buffer) {
  if (values.empty()) bad_value(name, "no values (a slot needs at least one)");
  if (values.size() > limits.max_slot_values)
    throw LimitExceeded("max_slot_values", values.size(), limits.max_slot_values,
                        "slot '" + name + "' has too many values");
  std::uint64_t total = 0;
  for (const std::string& v : values) total += v.size() + (spelling == SlotSpelling::Json ? 2 : 0);
  // Escapes only lengthen a JSON spelling, so checking the raw size first refuses a huge
  // request before any copying; the spelled size is checked again below.
  if (total > limits.max_slot_bytes)
    throw LimitExceeded("max_slot_bytes", total, limits.max_slot_bytes, "slot '" + name + "': the values are too long");
  std::vector<std::string_view> out;
  out.reserve(values.size());
  if (spelling == SlotSpelling::Raw) {
    for (const std::string& v : values) {
      if (v.empty()) bad_value(name, "an empty value cannot be spelled raw (a ${" + name + ":json} slot allows \"\")");
      if (!valid_utf8(v)) bad_value(name, "value " + quoted(v) + " is not valid UTF-8");
      out.emplace_back(v);
    }
  } else {
    buffer.reserve(static_cast<std::size_t>(total) + 16);
    std::vector<std::size_t> ends;
    ends.reserve(values.size());
    for (const std::string& v : values) {
      if (!append_json_canonical(buffer, v)) bad_value(name, "value " + quoted(v) + " is not valid UTF-8");
      ends.push_back(buffer.size());
    }
    if (buffer.size() > limits.max_slot_bytes)
      throw LimitExceeded("max_slot_bytes", buffer.size(), limits.max_slot_bytes,
                          "slot '" + name + "': the values are too long as JSON strings");
    std::size_t begin = 0;  // views only now: appending may have moved the buffer
    for (std::size_t end : ends) {
      out.emplace_back(buffer.data() + begin, end - begin);
      begin = end;
    }
  }
  std::sort(out.begin(), out.end());
  auto dup = std::adjacent_find(out.begin(), out.end());
  if (dup != out.end()) bad_value(name, "duplicate value " + quoted(unspelled(*dup, values, spelling)) + " (values must be distinct)");
  return out;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

}  // namespace

std::shared_ptr<const CompiledGrammar> CompiledGrammar::bind(const std::vector<SlotValues>& slots) const {
  if (skeleton_) throw SlotError("", "this grammar is already a binding: bind its skeleton instead");
  // Which values each slot name gets; every name given must be a slot, every slot given once.
  std::map<std::string_view, const std::vector<std::string>*> given;
  for (const SlotValues& s : slots) {
    if (!std::binary_search(slot_names_.begin(), slot_names_.end(), s.name))
      throw SlotError(s.name, "unknown slot '" + s.name + "' (" +
                                  (slot_names_.empty() ? std::string("the grammar has no slots")
                                                       : "the grammar's slots: " + join(slot_names_)) + ")");
    if (!given.emplace(s.name, &s.values).second) throw SlotError(s.name, "slot '" + s.name + "' is given twice");
  }
  if (slot_names_.empty()) return shared_from_this();
  for (const std::string& n : slot_names_)
    if (!given.count(n))
      throw SlotError(n, "slot '" + n + "' is not bound (every slot needs values: " + join(slot_names_) + ")");
  std::vector<std::int32_t> terminals;
  std::vector<Dfa> dfas;
  std::string buffer;
  for (std::size_t t = 0; t < grammar_->terminals.size(); ++t) {
    const Terminal& term = grammar_->terminals[t];
    if (!term.is_slot) continue;
    buffer.clear();
    const auto spelled = spell_values(term.slot.name, *given.at(term.slot.name), term.slot.spelling, limits_, buffer);
    terminals.push_back(static_cast<std::int32_t>(t));
    dfas.push_back(Dfa::from_strings(spelled, limits_));
  }
  bindings_made_.fetch_add(1, std::memory_order_relaxed);
  return std::make_shared<const CompiledGrammar>(BindingTag{}, shared_from_this(), std::move(terminals),
                                                 std::move(dfas));
}

}  // namespace corral
