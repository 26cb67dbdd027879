// libmoegrad.so stays loaded once loaded (linked -z nodelete). The default
// context (a NULL context argument) is made on first use and never
// destroyed, so its worker threads would outlive a dlclose and wake into
// unmapped code; a plugin host that loads and unloads the library would
// crash on the next call or leak a pool per load. Here the library is
// loaded by path, called, then closed: it must still be mapped, so that a
// load without loading (RTLD_NOLOAD) finds it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <moegrad/moegrad.h>

namespace {

TEST(Unload, TheSharedLibraryStaysLoadedAfterDlclose) {
  void* lib = dlopen(MOEGRAD_SHARED_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  using Version = const char* (*)();
  auto* version = reinterpret_cast<Version>(dlsym(lib, "moegrad_version"));
  ASSERT_NE(version, nullptr) << dlerror();
  EXPECT_STREQ(version(), MOEGRAD_VERSION_STRING);
  ASSERT_EQ(dlclose(lib), 0) << dlerror();
  void* again = dlopen(MOEGRAD_SHARED_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(again, nullptr) << "unmapped by dlclose";
  if (again != nullptr) dlclose(again);
}

}  // namespace
