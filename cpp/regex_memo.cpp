// regex_memo.cpp — the process-wide memo of regex terminal trees (see regex_memo.hpp).
#include "regex_memo.hpp"

#include <mutex>
#include <string>
#include <unordered_map>

namespace corral {
namespace {

struct Entry {
  NodePtr tree;
  std::uint32_t max_nfa_states = 0;  // the limits it was built under
  std::uint32_t max_nesting = 0;
};

struct RegexMemo {
  std::mutex mu;
  std::unordered_map<std::string, Entry> entries;  // key: mode byte + pattern
  std::size_t bytes = 0;
};

RegexMemo& memo() {
  static RegexMemo m;
  return m;
}

std::string key_of(std::string_view pattern, char mode) {
  std::string k;
  k.reserve(pattern.size() + 1);
  k.push_back(mode);
  k.append(pattern);
  return k;
}

}  // namespace

NodePtr memo_regex_terminal(std::string_view pattern, char mode, const Limits& limits) {
  if (pattern.size() > kRegexMemoMaxPattern) return nullptr;
  const std::string k = key_of(pattern, mode);
  RegexMemo& m = memo();
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.entries.find(k);
  if (it == m.entries.end()) return nullptr;
  const Entry& e = it->second;
  if (e.max_nfa_states > limits.max_nfa_states || e.max_nesting > nesting_limit(limits)) return nullptr;
  return e.tree;
}

void memo_put_regex_terminal(std::string_view pattern, char mode, const Limits& limits, NodePtr tree) {
  if (pattern.size() > kRegexMemoMaxPattern || !tree) return;
  std::string k = key_of(pattern, mode);
  RegexMemo& m = memo();
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.entries.size() >= kRegexMemoEntries || m.bytes + k.size() > kRegexMemoBytes) {
    m.entries.clear();
    m.bytes = 0;
  }
  const std::size_t size = k.size();
  Entry e{std::move(tree), limits.max_nfa_states, nesting_limit(limits)};
  auto [it, fresh] = m.entries.try_emplace(std::move(k), e);
  if (fresh) {
    m.bytes += size;
  } else if (e.max_nfa_states <= it->second.max_nfa_states && e.max_nesting <= it->second.max_nesting) {
    it->second = std::move(e);  // built under smaller limits: reusable by more compiles
  }
}

void clear_regex_memo() {
  RegexMemo& m = memo();
  std::lock_guard<std::mutex> lock(m.mu);
  m.entries.clear();
  m.bytes = 0;
}

}  // namespace corral
