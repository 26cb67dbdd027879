#include "runtime/fork_safe_mutex.h"

#include <pthread.h>

#include "runtime/fork_generation.h"

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

namespace {

// If the C library cannot record the handlers (ENOMEM), the mutexes are
// plain ones, as they were before this class.
void install_fork_handlers() {
  (void)pthread_atfork(ForkRegistry::before_fork, ForkRegistry::after_fork, ForkRegistry::after_fork);
  // The fork counter registers its own handler the first time it is read.
  // That must not first happen while a ForkSafeMutex is held (a pool
  // starting under its context's lock): a fork() at that moment would run
  // before_fork, which waits for the mutex, while the thread holding it
  // waits in pthread_atfork for a lock the C library may hold across the
  // handlers (musl does, and older glibc did).
  (void)fork_generation();
}

// Once per process, with pthread_once rather than a function-local static
// (see runtime/cpu_features.cpp: a fork during the installation must not
// leave the child a guard held forever).
pthread_once_t g_handlers_installed = PTHREAD_ONCE_INIT;

}  // namespace

ForkSafeMutex::ForkSafeMutex() noexcept {
  pthread_once(&g_handlers_installed, install_fork_handlers);
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
