// Write-then-rename: the output appears complete under its name or not at all.
// The temp file lives in the destination directory (rename is only atomic
// within one file system) and is removed by the destructor unless commit()
// succeeded, so no error path - an exception included - leaves a file behind;
// nor does SIGINT, SIGTERM or SIGHUP (cli/signals.h removes the temp files
// still registered here before the process dies).
//
// What is replaced is the file the path names: a symbolic link stays and
// the file it points to gets the new contents, with that file's permission
// bits; a file the user may not write is refused, as by a shell
// redirection. Written in place, without a temp file: a file the process
// already holds open for writing (/dev/stdout, /dev/fd/N: the caller's
// redirection), through that descriptor, and a device or FIFO (a named
// pipe), which cannot be replaced. So is a file that rename() may not
// replace: a mount point (a file bind-mounted into a container), a writable
// file in a directory we may not write to, or another user's file in a
// sticky directory such as /tmp, where neither the file nor the directory
// is ours and we lack CAP_FOWNER. It is truncated only at
// the first write, after the work: a failed run leaves it as it was, but a
// write that fails midway (a full disk) leaves it partial, as a shell
// redirection would. SIGINT, SIGTERM and SIGHUP are blocked on the writing
// thread from that truncation to commit(), so a caller should have no other
// thread left that could take them (grad-x ends its context's threads
// first; `moegrad bench --json-file` does not, so a signal during its last
// write can leave such a file partial). Every name of the file (hard links) sees the new contents, as
// with a shell redirection; a replaced file's other names keep the old.
#pragma once

#include <signal.h>
#include <sys/stat.h>

#include <cstddef>
#include <string>

namespace moegrad::cli {

class AtomicFile {
 public:
  // Creates the temp file now (or opens what is written in place), so an
  // unwritable destination fails before any long computation. Throws
  // CliError (exit 1).
  explicit AtomicFile(std::string path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(const void* data, std::size_t bytes);
  // fsync, close, rename into place, fsync the directory (written in place:
  // close).
  void commit();

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  void truncate_if_first_write();
  void release_signals() noexcept;
  void create_temp(const std::string& target, const struct stat* existing);
  // Closes the file and, unless committed, removes the temp file.
  void discard() noexcept;

  std::string path_;       // as given, for messages
  std::string target_;     // the file renamed over (path_ with symlinks resolved)
  std::string dir_;        // target_'s directory
  std::string temp_path_;  // empty when writing in place
  int fd_ = -1;
  int temp_slot_ = -1;     // its entry in the signal handler's list
  bool committed_ = false;
  bool truncate_before_write_ = false;  // a regular file to rewrite in place
  bool rewritten_in_place_ = false;     // ... truncated: fsync it at commit
  bool signals_held_ = false;           // termination signals blocked since
  sigset_t signals_before_{};
};

// For the signal handlers (async-signal-safe): unlinks every temp file not
// yet committed or removed.
void remove_temp_files_on_signal() noexcept;

}  // namespace moegrad::cli
