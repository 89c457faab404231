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
  const std::size_t b = entry->memory_bytes;
  if (b > kMaxBytes) return;  // never kept: it would evict everything else
  // Evicted entries are released after the lock (their masks, 32 KB each on a 262k vocabulary).
  std::vector<std::shared_ptr<const FrontierEntry>> evicted;
  std::unique_lock<std::shared_mutex> lock(mu_);
  // Over budget, a few entries make room, taken from random buckets (random eviction: no
  // bookkeeping on the read path, and the table's own first element would be a recent one).
  // Emptying the whole pool here instead stalled the one mask that met the budget: on Gemma 3,
  // 256 MB of 32 KB masks took over 20 ms to free.
  while (bytes_ + b > kMaxBytes && !entries_.empty()) {
    evict_seed_ = evict_seed_ * 6364136223846793005ull + 1442695040888963407ull;
    const std::size_t bucket = static_cast<std::size_t>(evict_seed_ >> 33) % entries_.bucket_count();
    auto local = entries_.begin(bucket);
    if (local == entries_.end(bucket)) continue;  // an empty bucket: draw again
    auto it = entries_.find(local->first);
    bytes_ -= it->second->memory_bytes;
    evicted.push_back(std::move(it->second));
    entries_.erase(it);
  }
  if (entries_.emplace(key, std::move(entry)).second) bytes_ += b;
  lock.unlock();
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
