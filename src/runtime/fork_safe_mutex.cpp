#include "runtime/fork_safe_mutex.h"

#include <pthread.h>

namespace moegrad::runtime {

// Every live ForkSafeMutex. Constant-initialised and trivially destructible,
// so a mutex destroyed during static destruction (a user's static context)
// still finds it.
struct ForkRegistry {
  std::mutex mutex;
  ForkSafeMutex* head = nullptr;

  static void before_fork() {
    registry.mutex.lock();
    for (ForkSafeMutex* m = registry.head; m != nullptr; m = m->next_) m->mutex_.lock();
  }
  // In the parent and in the child alike: the forking thread took the locks,
  // and it is the child's only thread.
  static void after_fork() {
    for (ForkSafeMutex* m = registry.head; m != nullptr; m = m->next_) m->mutex_.unlock();
    registry.mutex.unlock();
  }

  static ForkRegistry registry;
};

constinit ForkRegistry ForkRegistry::registry;

ForkSafeMutex::ForkSafeMutex() noexcept {
  // Once per process. If the C library cannot record the handlers (ENOMEM),
  // the mutexes are plain ones, as they were before this class.
  static const bool handlers = pthread_atfork(ForkRegistry::before_fork, ForkRegistry::after_fork,
                                              ForkRegistry::after_fork) == 0;
  (void)handlers;
  std::lock_guard<std::mutex> lock(ForkRegistry::registry.mutex);
  next_ = ForkRegistry::registry.head;
  if (next_ != nullptr) next_->prev_ = this;
  ForkRegistry::registry.head = this;
}

ForkSafeMutex::~ForkSafeMutex() {
  std::lock_guard<std::mutex> lock(ForkRegistry::registry.mutex);
  if (prev_ != nullptr) {
    prev_->next_ = next_;
  } else {
    ForkRegistry::registry.head = next_;
  }
  if (next_ != nullptr) next_->prev_ = prev_;
}

}  // namespace moegrad::runtime
