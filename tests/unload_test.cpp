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

#include <chrono>
#include <cstdlib>
#include <thread>

namespace {

// Closes `lib` (loaded from `path`); it must then still be mapped, so that a
// load without loading (RTLD_NOLOAD) finds it.
void expect_mapped_after_dlclose(void* lib, const char* path) {
  ASSERT_EQ(dlclose(lib), 0) << dlerror();
  void* again = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(again, nullptr) << path << " was unmapped by dlclose";
  if (again != nullptr) dlclose(again);
}

TEST(Unload, TheSharedLibraryStaysLoadedAfterDlclose) {
  void* lib = dlopen(MOEGRAD_SHARED_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  using Version = const char* (*)();
  auto* version = reinterpret_cast<Version>(dlsym(lib, "moegrad_version"));
  ASSERT_NE(version, nullptr) << dlerror();
  EXPECT_STREQ(version(), MOEGRAD_VERSION_STRING);
  expect_mapped_after_dlclose(lib, MOEGRAD_SHARED_LIBRARY);
}

// The same for a plugin of a user's that links libmoegrad.a through
// moegrad::moegrad_static (tests/unload_plugin.c): the archive's code is
// the plugin's, and so are the default context's two sleeping workers, so
// the target links the plugin -z nodelete too. Without that the plugin is
// unmapped, and the process crashes once a worker wakes.
TEST(Unload, APluginLinkingTheArchiveStaysLoadedAfterDlclose) {
  ASSERT_EQ(setenv("MOEGRAD_NUM_THREADS", "2", 1), 0);  // workers, on any machine
  void* plugin = dlopen(MOEGRAD_UNLOAD_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(plugin, nullptr) << dlerror();
  using Run = int (*)();
  auto* run = reinterpret_cast<Run>(dlsym(plugin, "unload_plugin_run"));
  ASSERT_NE(run, nullptr) << dlerror();
  EXPECT_EQ(run(), 0) << "the plugin's grad-x call failed or computed wrong values";
  expect_mapped_after_dlclose(plugin, MOEGRAD_UNLOAD_PLUGIN);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // workers that wake find their code
}

}  // namespace
