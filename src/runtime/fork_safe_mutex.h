// fork() copies only the calling thread: a mutex that another thread holds
// at that moment stays locked in the child, whose next lock() then waits
// forever. A ForkSafeMutex is never copied held: around every fork() (a
// pthread_atfork handler) the forking thread takes all of them, so no other
// thread holds one, and releases them in the parent and in the child.
//
// For the few locks a forked child must be able to take again (a context's
// pool lock, which the child's first run takes to start its own workers).
// Lock order: the registry, then its mutexes; so no code may create or
// destroy a ForkSafeMutex while it holds one.
#pragma once

#include <mutex>

namespace moegrad::runtime {

class ForkSafeMutex {
 public:
  ForkSafeMutex() noexcept;   // joins the registry
  ~ForkSafeMutex();           // leaves it
  ForkSafeMutex(const ForkSafeMutex&) = delete;
  ForkSafeMutex& operator=(const ForkSafeMutex&) = delete;

  void lock() { mutex_.lock(); }
  void unlock() { mutex_.unlock(); }

 private:
  friend struct ForkRegistry;
  std::mutex mutex_;
  // The registry is an intrusive list, so joining it never allocates.
  ForkSafeMutex* prev_ = nullptr;
  ForkSafeMutex* next_ = nullptr;
};

}  // namespace moegrad::runtime
