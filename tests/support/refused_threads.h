// Refusing threads on purpose: interposes the C library's pthread_create for
// the whole process (std::thread included) and, while refuse_threads is
// set, fails it with EAGAIN, as the kernel does at a pids or RLIMIT_NPROC
// limit. Defines pthread_create: include it in exactly one file of a test
// binary of its own.
//
// Where a sanitizer's runtime is linked statically (clang's), its
// pthread_create interceptor is a weak alias that this definition would
// replace, hiding every thread from it (ThreadSanitizer would crash): there
// nothing is interposed, REFUSED_THREADS_UNAVAILABLE is defined, and the
// tests skip.
#pragma once

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>

#if defined(__SANITIZE_THREAD__)
#define REFUSED_THREADS_UNAVAILABLE 1
#elif defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define REFUSED_THREADS_UNAVAILABLE 1
#endif
#endif

namespace refused_threads {

inline std::atomic<bool> refuse{false};  // while set, every pthread_create fails
inline std::atomic<int> refused{0};      // how many it failed

}  // namespace refused_threads

#ifndef REFUSED_THREADS_UNAVAILABLE
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  using PthreadCreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static std::atomic<PthreadCreateFn> real_pthread_create{nullptr};
  PthreadCreateFn real = real_pthread_create.load();
  if (real == nullptr) {
    real = reinterpret_cast<PthreadCreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
    real_pthread_create.store(real);
  }
  if (refused_threads::refuse.load()) {
    refused_threads::refused.fetch_add(1);
    return EAGAIN;
  }
  return real(thread, attr, start, arg);
}
#endif
