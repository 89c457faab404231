// batch.cpp — see batch.hpp.
#include "batch.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace corral {
namespace {

class WorkerPool {
 public:
  explicit WorkerPool(std::size_t workers) {
    for (std::size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  std::size_t size() const { return threads_.size(); }

  /// Run job(i) for i in [0, n) on up to `helpers` workers plus the calling thread.
  void run(std::size_t n, std::size_t helpers, const std::function<void(std::size_t)>& job) {
    std::lock_guard<std::mutex> serial(run_mu_);  // one batch at a time
    {
      // No worker is busy here (the previous run waited for busy_ == 0 and set active_ = 0).
      std::lock_guard<std::mutex> lock(mu_);
      next_.store(0);
      done_.store(0);
      job_ = &job;
      n_ = n;
      active_ = std::min(helpers, threads_.size());
      ++generation_;
    }
    cv_.notify_all();
    work();
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return done_.load() == n_ && busy_ == 0; });
    active_ = 0;  // a worker waking late must not join a finished (or the next) batch
    job_ = nullptr;
  }

 private:
  void work() {
    for (std::size_t i = next_.fetch_add(1); i < n_; i = next_.fetch_add(1)) {
      (*job_)(i);
      done_.fetch_add(1);
    }
  }
  void loop() {
    std::uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || (generation_ != seen && active_ > 0); });
      if (stop_) return;
      seen = generation_;
      --active_;
      ++busy_;
      lock.unlock();
      work();
      lock.lock();
      --busy_;
      done_cv_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(std::size_t)>* job_ = nullptr;
  std::size_t n_ = 0, active_ = 0, busy_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::atomic<std::size_t> next_{0}, done_{0};
};

WorkerPool& pool() {
  static WorkerPool p(std::max<std::size_t>(1, std::thread::hardware_concurrency()) - 1);
  return p;
}

}  // namespace

void fill_next_token_bitmasks(const std::vector<Matcher*>& matchers, const std::vector<std::int32_t*>& rows,
                              std::size_t threads) {
  const std::size_t n = matchers.size();
  const std::size_t hw = std::max<std::size_t>(1, std::thread::hardware_concurrency());
  const std::size_t t = std::min(n, threads == 0 ? hw : threads);
  if (t <= 1 || pool().size() == 0) {
    for (std::size_t i = 0; i < n; ++i) matchers[i]->fill_next_token_bitmask(rows[i]);
    return;
  }
  const std::function<void(std::size_t)> job = [&](std::size_t i) { matchers[i]->fill_next_token_bitmask(rows[i]); };
  pool().run(n, t - 1, job);
}

}  // namespace corral
