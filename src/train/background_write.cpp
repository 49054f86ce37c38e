// BackgroundWrite: the writer thread, started with the stop signals blocked.
#include "train/background_write.hpp"

#include <pthread.h>
#include <signal.h>

#include "common/error.hpp"

namespace dtrain {

BackgroundWrite::~BackgroundWrite() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundWrite::start(std::function<ShardWrite()> job) {
  if (thread_.joinable()) fatal("BackgroundWrite::start with a write in flight");
  done_.store(false, std::memory_order_relaxed);
  result_ = ShardWrite{};
  // The thread inherits the signal mask: SIGUSR1/SIGTERM are blocked there from its first instruction,
  // so they always reach a thread that does not block them (the main thread records them).
  sigset_t stop, old;
  sigemptyset(&stop);
  sigaddset(&stop, SIGUSR1);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, &old);
  struct Restore {
    sigset_t* old;
    ~Restore() { pthread_sigmask(SIG_SETMASK, old, nullptr); }
  } restore{&old};
  thread_ = std::thread([this, job = std::move(job)] {
    try {
      result_ = job();
    } catch (const std::exception& e) {  // write_shard_of_rank returns its failures; anything else lands here
      result_.error = e.what();
    } catch (...) {
      result_.error = "unknown failure in the background checkpoint write";
    }
    done_.store(true, std::memory_order_release);
  });
}

ShardWrite BackgroundWrite::wait() {
  if (!thread_.joinable()) fatal("BackgroundWrite::wait with no write in flight");
  thread_.join();
  return result_;
}

}  // namespace dtrain
