#include "atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

#include "cli_error.h"
#include "signals.h"

namespace moegrad::cli {
namespace {

// The temp files on disk, for the signal handlers: fixed storage (a handler
// may not allocate), a slot is free (0), being filled (1) or live (2).
struct TempSlot {
  std::atomic<int> state{0};
  char path[PATH_MAX];
};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler reads the slots");
constexpr int kTempSlots = 4;
TempSlot g_temp_slots[kTempSlots];

// The slot now holding `path`, or -1 (no free slot, or too long a path: that
// temp file is then only removed by the destructor).
int register_temp(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = 0;
    if (g_temp_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_temp_slots[i].path, path.c_str(), path.size() + 1);
      g_temp_slots[i].state.store(2);
      return i;
    }
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot >= 0) g_temp_slots[slot].state.store(0);
}

// Blocks the termination signals (signals.h) on this thread; false if it could not.
bool block_termination_signals(sigset_t* previous) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kTerminationSignals) sigaddset(&set, sig);
  return pthread_sigmask(SIG_BLOCK, &set, previous) == 0;
}

// Holds back the termination signals in the calling thread while a temp
// file is created and registered: one arriving in between would find the
// file on disk but not in the list, and leave it there (seen once in CI: a
// SIGTERM sent the moment the file appeared). A signal held back is
// delivered when this ends, and the handler then finds the file. The CLI
// creates its outputs before it starts any other thread, so no other
// thread can take the signal meanwhile.
class TerminationSignalsHeld {
 public:
  TerminationSignalsHeld() : held_(block_termination_signals(&previous_)) {}
  ~TerminationSignalsHeld() {
    if (held_) pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  TerminationSignalsHeld(const TerminationSignalsHeld&) = delete;
  TerminationSignalsHeld& operator=(const TerminationSignalsHeld&) = delete;

 private:
  sigset_t previous_;
  bool held_ = false;
};

bool open_for_writing_on(int fd, const struct stat& file) {
  const int flags = ::fcntl(fd, F_GETFL);
  const int access = flags & O_ACCMODE;
  struct stat st {};
  return flags >= 0 && (access == O_WRONLY || access == O_RDWR) && ::fstat(fd, &st) == 0 &&
         st.st_dev == file.st_dev && st.st_ino == file.st_ino;
}

// A descriptor of this process open for writing on `file`, or -1.
//
// Found by the file's identity (st_dev, st_ino), not by the path's spelling:
// /dev/stdout, /dev/fd/N, /proc/self/fd/N, a link to one of them, and the
// file's own name (`--out dx.npy > dx.npy`) all name what a descriptor
// holds, and a list of spellings would miss some. Only descriptors open for
// writing count, so `--out x.npy < x.npy` still replaces x.npy. The
// descriptors are listed from /proc/self/fd; without /proc only the
// standard streams are checked (/dev/stdout needs /proc anyway).
int descriptor_writing_to(const struct stat& file) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) {
    for (int fd = 0; fd <= 2; ++fd)
      if (open_for_writing_on(fd, file)) return fd;
    return -1;
  }
  int found = -1;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name(entry->d_name);
    int fd = -1;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (ec != std::errc() || end != name.data() + name.size() || fd == ::dirfd(dir)) continue;
    // The lowest: the standard streams before anything inherited.
    if ((found < 0 || fd < found) && open_for_writing_on(fd, file)) found = fd;
  }
  ::closedir(dir);
  return found;
}

// The temp file's name in a directory whose names are at most `room` bytes:
// ".NAME.moegrad-tmp-PID-ATTEMPT", with NAME cut short when it would not fit
// (a valid output name may be up to NAME_MAX itself) but still the start of
// the output's name, and never cut inside a UTF-8 character, so `ls` shows
// what it is for.
std::string temp_name(const std::string& base, std::size_t room, int attempt) {
  const std::string suffix = ".moegrad-tmp-" + std::to_string(::getpid()) + "-" + std::to_string(attempt);
  std::size_t keep = base.size();
  if (1 + keep + suffix.size() > room) {
    keep = room > 1 + suffix.size() ? room - 1 - suffix.size() : 0;
    while (keep > 0 && (static_cast<unsigned char>(base[keep]) & 0xC0) == 0x80) --keep;
  }
  std::string name(".");
  name.append(base, 0, keep).append(suffix);
  return name;
}

// The directory part of a path ("." for a bare name).
std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

// Whether this thread has CAP_FOWNER in its effective set (root may not:
// a container started with capabilities dropped), which the sticky rule
// asks for, not uid 0.
bool has_cap_fowner() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_TO_INDEX(CAP_FOWNER)].effective & CAP_TO_MASK(CAP_FOWNER)) != 0;
}

// Whether rename() may put a new file in the place of `target` (a regular
// file, `st` its stat). Not where it is a mount point, such as a file
// bind-mounted into a container (EBUSY), nor in a directory we may not
// write to (EACCES), nor another user's file in a sticky directory such as
// /tmp, unless the directory is ours or we have CAP_FOWNER (EPERM): asked
// now, since rename() would say so only after the work.
bool replaceable_by_rename(const std::string& target, const struct stat& st) {
  const std::string dir_path = directory_of(target);
  struct stat dir {};
  if (::stat(dir_path.c_str(), &dir) != 0) return true;  // create_temp reports it
  struct statx x {};
  if (::statx(AT_FDCWD, target.c_str(), 0, STATX_BASIC_STATS, &x) == 0 &&
      (x.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0) {
    if ((x.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0) return false;
  } else if (dir.st_dev != st.st_dev) {  // before Linux 5.8: a mount from another file system
    return false;
  }
  // Such as a shared output directory with a file made for the user in it.
  if (::faccessat(AT_FDCWD, dir_path.c_str(), W_OK | X_OK, AT_EACCESS) != 0) return false;
  const uid_t me = ::geteuid();
  return (dir.st_mode & S_ISVTX) == 0 || me == st.st_uid || me == dir.st_uid || has_cap_fowner();
}

// Opens the regular file examined as `st`, at `path`, for writing in place,
// or refuses: in a sticky directory another user may have swapped it, since
// it was examined, for a link to one of ours (O_NOFOLLOW, and the same
// device and inode) or for a FIFO, whose open would wait (O_NONBLOCK).
int open_examined_file(const std::string& shown, const std::string& path, const struct stat& st) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) data_error(shown + ": cannot open for writing: " + std::strerror(errno));
  struct stat now {};
  const int flags = ::fcntl(fd, F_GETFL);
  if (::fstat(fd, &now) != 0 || !S_ISREG(now.st_mode) || now.st_dev != st.st_dev || now.st_ino != st.st_ino ||
      flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    ::close(fd);
    data_error(shown + ": the file changed while it was being opened");
  }
  return fd;
}

}  // namespace

void remove_temp_files_on_signal() noexcept {
  // A slot whose file was just renamed or unlinked names nothing: unlink
  // then fails harmlessly.
  for (TempSlot& s : g_temp_slots)
    if (s.state.load() == 2) ::unlink(s.path);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  const std::size_t slash = path_.rfind('/');
  const std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") data_error(path_ + ": not a file name");

  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {  // follows symbolic links
    if (S_ISDIR(st.st_mode)) data_error(path_ + ": is a directory");
    if (const int held = descriptor_writing_to(st); held >= 0) {
      // Through that descriptor, not a new one: its offset and O_APPEND
      // are the caller's, so `( echo A; moegrad ... --out /dev/stdout ) >
      // log` keeps A and `>> log` appends, as for any command writing to
      // its stdout; replacing log would discard what the caller wrote to
      // it, and opening it again would write from offset 0 over it.
      fd_ = ::fcntl(held, F_DUPFD_CLOEXEC, 0);
      if (fd_ < 0)
        data_error(path_ + ": cannot duplicate descriptor " + std::to_string(held) + ": " + std::strerror(errno));
      return;
    }
    if (!S_ISREG(st.st_mode)) {
      // Renaming over /dev/null or a named pipe would replace the node
      // itself (as root, for every user of it): write into it instead, as a
      // shell redirection does (a FIFO waits here for its reader).
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd_ < 0) data_error(path_ + ": cannot open for writing: " + std::strerror(errno));
      return;
    }
    char* real = ::realpath(path_.c_str(), nullptr);
    if (real == nullptr) data_error(path_ + ": cannot resolve the path: " + std::strerror(errno));
    const std::string target(real);
    std::free(real);
    // rename() replaces a file whatever its mode bits; a shell redirection
    // or numpy.save would be refused a read-only one, and so is this, before
    // any work. AT_EACCESS: the effective IDs, as open() would use.
    if (::faccessat(AT_FDCWD, target.c_str(), W_OK, AT_EACCESS) != 0)
      data_error(path_ + ": cannot be overwritten: " + std::strerror(errno));
    if (!replaceable_by_rename(target, st)) {
      // Rewritten in place, as a shell redirection would, but opened
      // without truncation: the old contents stay until the first write,
      // which comes only once the result is complete.
      fd_ = open_examined_file(path_, target, st);
      truncate_before_write_ = true;
      return;
    }
    create_temp(target, &st);
    return;
  }
  const int err = errno;
  struct stat link {};
  if (::lstat(path_.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    // A link we may not follow (a loop: ELOOP) is not a dangling one.
    if (err == ENOENT) data_error(path_ + ": a symbolic link to a file that does not exist");
    data_error(path_ + ": " + std::strerror(err));
  }
  create_temp(path_, nullptr);
}

void AtomicFile::create_temp(const std::string& target, const struct stat* existing) {
  target_ = target;
  const std::size_t slash = target_.rfind('/');
  const std::string base = slash == std::string::npos ? target_ : target_.substr(slash + 1);
  dir_ = directory_of(target_);
  // Room for the temp file's name: NAME_MAX, and what PATH_MAX leaves after
  // "DIR/" (a path as long as the target's must work too).
  long name_max = ::pathconf(dir_.c_str(), _PC_NAME_MAX);
  if (name_max <= 0) name_max = NAME_MAX;
  const std::size_t path_room = dir_.size() + 2 < PATH_MAX ? PATH_MAX - 2 - dir_.size() : 0;
  const std::size_t room = std::min(static_cast<std::size_t>(name_max), path_room);
  // The temp name is shortened to fit, but the final rename() needs the name
  // as given: refuse one too long now, not after the work.
  if (base.size() > static_cast<std::size_t>(name_max))
    data_error(path_ + ": the file name is " + std::to_string(base.size()) + " bytes, more than the " +
               std::to_string(name_max) + " that " + dir_ + " allows");
  if (target_.size() >= PATH_MAX)
    data_error(path_ + ": the path is " + std::to_string(target_.size()) + " bytes, PATH_MAX is " +
               std::to_string(PATH_MAX));
  // A hidden name that says who made it, unique per process and attempt;
  // O_EXCL makes a clash with any existing file a retry, never an overwrite.
  // Mode 0666 lets the umask decide, as for any file the user creates.
  {
    const TerminationSignalsHeld held;
    for (int attempt = 0; attempt < 100; ++attempt) {
      temp_path_ = dir_ + "/" + temp_name(base, room, attempt);
      fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) break;
      if (errno != EEXIST) {
        const int err = errno;
        temp_path_.clear();
        data_error(path_ + ": cannot create a file in " + dir_ + ": " + std::strerror(err));
      }
    }
    if (fd_ < 0) {
      temp_path_.clear();
      data_error(path_ + ": cannot create a temporary file in " + dir_);
    }
    temp_slot_ = register_temp(temp_path_);
  }
  if (existing != nullptr) {
    // The replacement keeps the replaced file's owner and group where we may
    // set them (the owner as root; the group as a member of it, which
    // fchown refuses together with another user's uid), and its permission
    // bits, so a private file stays private and a shared one shared. Where
    // the owner or group is not kept, those who held it fall into the
    // remaining classes, and the writer's group or the directory's takes
    // the group bits: so the group and other bits are limited to what each
    // class they could now apply to had, and the set-id bits go. No one
    // but the writer gains access.
    if (::fchown(fd_, existing->st_uid, existing->st_gid) != 0 &&
        ::fchown(fd_, static_cast<uid_t>(-1), existing->st_gid) != 0) {
      // Neither is permitted: the new file's group stays, limited below.
    }
    struct stat now {};
    if (::fstat(fd_, &now) != 0) {  // assume neither was kept
      now.st_uid = static_cast<uid_t>(-1);
      now.st_gid = static_cast<gid_t>(-1);
    }
    mode_t mode = existing->st_mode & 07777;
    const mode_t user = (mode >> 6) & 7;
    mode_t group = (mode >> 3) & 7, other = mode & 7;
    if (now.st_gid != existing->st_gid) {
      group = other = group & other;
      mode &= ~static_cast<mode_t>(S_ISGID);
    }
    if (now.st_uid != existing->st_uid) {
      group &= user;
      other &= user;
      mode &= ~static_cast<mode_t>(S_ISUID);
    }
    mode = (mode & ~static_cast<mode_t>(0777)) | user << 6 | group << 3 | other;
    if (::fchmod(fd_, mode) != 0) {
      const int err = errno;
      discard();  // a constructor that throws gets no destructor call
      fail("cannot set the permissions of the new file", err);
    }
  }
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  release_signals();
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
  unregister_temp(temp_slot_);
  temp_slot_ = -1;
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::fail(const std::string& what, int err) {
  data_error(path_ + ": " + what + ": " + std::strerror(err));
}

void AtomicFile::truncate_if_first_write() {
  if (!truncate_before_write_) return;
  // From here to close() the old contents are gone and the new ones not all
  // there: SIGINT, SIGTERM and SIGHUP wait (on this thread; a caller with
  // other threads blocks them there, see the header).
  signals_held_ = block_termination_signals(&signals_before_);
  if (::ftruncate(fd_, 0) != 0) fail("cannot truncate", errno);
  truncate_before_write_ = false;
  rewritten_in_place_ = true;
}

void AtomicFile::release_signals() noexcept {
  if (signals_held_) pthread_sigmask(SIG_SETMASK, &signals_before_, nullptr);
  signals_held_ = false;
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  truncate_if_first_write();
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed", errno);
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  const int fd = fd_;
  if (temp_path_.empty()) {  // written in place
    truncate_if_first_write();  // nothing was written: the result is empty
    // A regular file gets the rename path's fsync: a write-back error
    // (EIO, EDQUOT) is reported, not lost with exit status 0.
    if (rewritten_in_place_ && ::fsync(fd) != 0) fail("fsync failed", errno);
    fd_ = -1;
    if (::close(fd) != 0) fail("close failed", errno);
    committed_ = true;
    release_signals();
    return;
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at
  // an empty or partial file.
  if (::fsync(fd) != 0) fail("fsync failed", errno);
  fd_ = -1;
  if (::close(fd) != 0) fail("close failed", errno);
  if (::rename(temp_path_.c_str(), target_.c_str()) != 0) fail("rename failed", errno);
  committed_ = true;
  unregister_temp(temp_slot_);
  temp_slot_ = -1;
  // Makes the rename itself durable; failure here cannot undo the rename and
  // the data is already in place, so it is not an error.
  const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace moegrad::cli
