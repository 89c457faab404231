// mask_pool.cpp — see mask_pool.hpp.
#include "mask_pool.hpp"

#include <mutex>

namespace corral {

std::int32_t MaskPool::dfa_id(const Dfa& dfa, std::shared_ptr<const void> owner) {
  if (dfa.num_states() > kMaxDfaStates || dfa.empty_language()) return -1;
  const std::uint64_t fp = dfa.fingerprint();
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto range = dfas_.equal_range(fp);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second.second->same_as(dfa)) return it->second.first;
  if (num_dfas_ >= kMaxDfas) return -1;
  const auto id = static_cast<std::int32_t>(num_dfas_++);
  dfas_.emplace(fp, std::make_pair(id, std::shared_ptr<const Dfa>(std::move(owner), &dfa)));
  return id;
}

std::shared_ptr<const FrontierEntry> MaskPool::get(const std::vector<std::uint64_t>& key) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second;
}

void MaskPool::put(const std::vector<std::uint64_t>& key, std::shared_ptr<const FrontierEntry> entry) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (bytes_ + entry->memory_bytes > kMaxBytes) {
    entries_.clear();
    bytes_ = 0;
  }
  const std::size_t b = entry->memory_bytes;
  if (entries_.emplace(key, std::move(entry)).second) bytes_ += b;
}

std::shared_ptr<const CountSummary> MaskPool::count_summary(const Vocabulary& vocab) {
  std::call_once(summary_once_, [&] {
    const std::uint32_t d = vocab.share_depth();
    if (d > 0 && d <= kMaxSummaryDepth) summary_ = std::make_shared<const CountSummary>(vocab, d);
  });
  return summary_;
}

const InteriorSummary& MaskPool::interior_summary(const Vocabulary& vocab) {
  std::call_once(interior_once_, [&] { interior_ = std::make_unique<const InteriorSummary>(vocab); });
  return *interior_;
}

std::size_t MaskPool::entries() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return entries_.size();
}

}  // namespace corral
