// BackgroundWrite: one checkpoint shard write at a time on a thread of its own, so that training goes
// on while the shard is written (checkpoint.async_save). The thread makes no MPI call, whatever thread
// level MPI granted: every agreement about the write happens on the main thread (train/checkpointing).
// It does not take SIGUSR1/SIGTERM (the main thread records them). HDF5 is not thread-safe here: while
// a write is in flight the thread is the process's only HDF5 user, so its owner waits for it (wait())
// before any HDF5 call of its own.
#pragma once
#include <atomic>
#include <functional>
#include <thread>

#include "ckpt/checkpoint.hpp"

namespace dtrain {

class BackgroundWrite {
 public:
  BackgroundWrite() = default;
  BackgroundWrite(const BackgroundWrite&) = delete;
  BackgroundWrite& operator=(const BackgroundWrite&) = delete;
  ~BackgroundWrite();  // waits for a write in flight (an error unwinding the run); its result is dropped

  // Runs job on the thread; no write may be in flight.
  void start(std::function<ShardWrite()> job);
  bool in_flight() const { return thread_.joinable(); }
  // The job has returned (wait() will not block). Any thread.
  bool finished() const { return done_.load(std::memory_order_acquire); }
  // Blocks until the job has returned; its outcome. The write is no longer in flight.
  ShardWrite wait();

 private:
  std::thread thread_;
  std::atomic<bool> done_{false};
  ShardWrite result_;
};

}  // namespace dtrain
