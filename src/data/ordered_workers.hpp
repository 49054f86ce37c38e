// OrderedWorkers: N threads that each turn a batch into a result, handed back in the order the batches
// were submitted, so that what is written does not depend on N or on which thread ran what. A worker's
// exception is kept with its result and rethrown when that result's turn comes (the first problem in
// input order is the one reported). The caller keeps at most 2N batches in flight (full()), taking
// results with next() in between. With no workers (N = 0) there are no threads: submit() does the work
// on the caller's thread, as worker 0 (a run that must not depend on scheduling: the fuzz target).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace dtrain {

template <typename In, typename Out>
class OrderedWorkers {
 public:
  // work(worker index, batch): runs on worker `index`'s thread (per-worker state, e.g. a tokenizer copy).
  OrderedWorkers(int workers, std::function<Out(int, In&)> work)
      : work_(std::move(work)), limit_(2 * static_cast<std::size_t>(workers > 0 ? workers : 1)), inline_(workers == 0) {
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { run(w); });
  }
  ~OrderedWorkers() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
      queue_.clear();  // an early end (an error): batches not started are dropped
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  OrderedWorkers(const OrderedWorkers&) = delete;
  OrderedWorkers& operator=(const OrderedWorkers&) = delete;

  // Queues the next batch.
  void submit(In batch) {
    if (inline_) {
      results_.emplace(submitted_++, attempt(0, batch));
      return;
    }
    std::lock_guard<std::mutex> lock(m_);
    queue_.push_back({submitted_++, std::move(batch)});
    wake_.notify_one();
  }
  std::size_t in_flight() const {
    std::lock_guard<std::mutex> lock(m_);
    return static_cast<std::size_t>(submitted_ - taken_);
  }
  bool full() const { return in_flight() >= limit_; }  // 2N in flight: take a result before submitting more
  // The result of the oldest batch not yet taken (waiting for it); empty when none is in flight. Rethrows
  // the batch's exception.
  std::optional<Out> next() {
    std::unique_lock<std::mutex> lock(m_);
    if (taken_ == submitted_) return std::nullopt;
    done_.wait(lock, [&] { return results_.count(taken_) > 0; });
    auto node = results_.extract(taken_++);
    lock.unlock();
    if (node.mapped().error) std::rethrow_exception(node.mapped().error);
    return std::move(*node.mapped().value);
  }

 private:
  struct Result {
    std::optional<Out> value;
    std::exception_ptr error;
  };
  void run(int w) {
    for (;;) {
      std::pair<std::uint64_t, In> job;
      {
        std::unique_lock<std::mutex> lock(m_);
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      Result r = attempt(w, job.second);
      {
        std::lock_guard<std::mutex> lock(m_);
        results_.emplace(job.first, std::move(r));
      }
      done_.notify_all();
    }
  }
  Result attempt(int w, In& batch) {
    Result r;
    try {
      r.value.emplace(work_(w, batch));
    } catch (...) {
      r.error = std::current_exception();
    }
    return r;
  }

  std::function<Out(int, In&)> work_;
  std::size_t limit_;
  mutable std::mutex m_;
  std::condition_variable wake_, done_;
  std::deque<std::pair<std::uint64_t, In>> queue_;
  std::map<std::uint64_t, Result> results_;
  std::uint64_t submitted_ = 0, taken_ = 0;
  bool stop_ = false;
  bool inline_;
  std::vector<std::thread> threads_;
};

}  // namespace dtrain
