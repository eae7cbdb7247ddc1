#include "rankscope/model/temporary_paths.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "rankscope/model/error.h"

namespace rankscope {
namespace {

// A signal handler may not take a lock or free memory; the watching thread
// may, so the paths are removed there.
std::mutex g_mutex;

std::vector<std::string>& registered_paths() {
  static std::vector<std::string> paths;
  return paths;
}

std::function<void(int)>& registered_last_words() {
  static std::function<void(int)> last_words;
  return last_words;
}

void remove_quietly(const std::string& path) {
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
}

// Every thread but the one removing the paths waits in this handler until
// the process ends, so that none makes a file in a path while it goes (an
// import writing its next shard into its folder, say).
constexpr int kParkSignal = SIGURG;
std::atomic<int> g_parked{0};

void park_until_the_end(int) {
  g_parked.fetch_add(1);
  for (;;) ::pause();
}

// Parks the process's other threads; gives up waiting on one that exits meanwhile (or has the signal blocked)
// after a second.
void park_other_threads() {
  struct sigaction park {};
  park.sa_handler = park_until_the_end;
  sigfillset(&park.sa_mask);
  ::sigaction(kParkSignal, &park, nullptr);
  const pid_t process = ::getpid(), self = static_cast<pid_t>(::syscall(SYS_gettid));
  int signalled = 0;
  if (DIR* tasks = ::opendir("/proc/self/task")) {
    while (const dirent* task = ::readdir(tasks)) {
      const pid_t thread = static_cast<pid_t>(std::atoi(task->d_name));
      if (thread > 0 && thread != self && ::syscall(SYS_tgkill, process, thread, kParkSignal) == 0) ++signalled;
    }
    ::closedir(tasks);
  }
  for (int waited_ms = 0; g_parked.load() < signalled && waited_ms < 1000; ++waited_ms) ::usleep(1000);
}

// Removes `name` in the folder `at`, a folder with all it holds. With the
// other threads parked, allocating could wait forever on a lock one of them
// holds: this allocates nothing.
void remove_tree(int at, const char* name) {
  if (::unlinkat(at, name, 0) == 0 || errno != EISDIR) return;
  const int folder = ::openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (folder < 0) return;
  alignas(dirent64) char entries[8192];
  // Entries removed while the folder is read may hide others from that read: read again from the start.
  for (int pass = 0; pass < 4; ++pass) {
    ::lseek(folder, 0, SEEK_SET);
    for (long got; (got = ::syscall(SYS_getdents64, folder, entries, sizeof(entries))) > 0;) {
      for (long offset = 0; offset < got;) {
        // glibc's dirent64 is the kernel's linux_dirent64.
        const auto* entry = reinterpret_cast<const dirent64*>(entries + offset);
        if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) {
          remove_tree(folder, entry->d_name);
        }
        offset += entry->d_reclen;
      }
    }
    if (::unlinkat(at, name, AT_REMOVEDIR) == 0 || errno != ENOTEMPTY) break;
  }
  ::close(folder);
}

}  // namespace

TemporaryPath::TemporaryPath(std::string path) : path_(std::move(path)) {
  std::lock_guard<std::mutex> lock(g_mutex);
  registered_paths().push_back(path_);
}

TemporaryPath::~TemporaryPath() {
  std::lock_guard<std::mutex> lock(g_mutex);
  remove_quietly(path_);
  auto& paths = registered_paths();
  paths.erase(std::find(paths.begin(), paths.end(), path_));
}

LastWords::LastWords(std::function<void(int)> words) {
  std::lock_guard<std::mutex> lock(g_mutex);
  registered_last_words() = std::move(words);
}

LastWords::~LastWords() {
  std::lock_guard<std::mutex> lock(g_mutex);
  registered_last_words() = nullptr;
}

void remove_temporary_paths_on_signals() {
  static std::once_flag started;
  std::call_once(started, [] {
    sigset_t watched;
    sigemptyset(&watched);
    for (const int signal_number : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction current {};
      // A signal ignored on purpose (nohup, a background job) stays ignored.
      if (::sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
      sigaddset(&watched, signal_number);
    }
    ::pthread_sigmask(SIG_BLOCK, &watched, nullptr);
    std::thread([watched] {
      int signal_number = 0;
      if (::sigwait(&watched, &signal_number) != 0) return;
      std::function<void(int)> last_words;
      {
        std::lock_guard<std::mutex> lock(g_mutex);
        last_words = registered_last_words();
      }
      if (last_words) last_words(signal_number);
      // Held to the end: no path is registered or removed by another thread meanwhile.
      g_mutex.lock();
      const std::vector<std::string> paths = registered_paths();
      park_other_threads();
      for (const std::string& path : paths) remove_tree(AT_FDCWD, path.c_str());
      std::signal(signal_number, SIG_DFL);
      sigset_t this_one;
      sigemptyset(&this_one);
      sigaddset(&this_one, signal_number);
      ::pthread_sigmask(SIG_UNBLOCK, &this_one, nullptr);
      ::raise(signal_number);
    }).detach();
  });
}

void move_into_place(const std::string& partial, const std::string& output, bool replace) {
  int error = 0;
  if (replace) {
    if (std::rename(partial.c_str(), output.c_str()) == 0) return;
    error = errno;
  } else if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, output.c_str(), RENAME_NOREPLACE) == 0) {
    return;
  } else {
    error = errno;
    // A file system without it (NFS before 4.x servers that have it): a hard link is as exclusive.
    if (error == EINVAL || error == ENOSYS) {
      if (::link(partial.c_str(), output.c_str()) == 0) {
        ::unlink(partial.c_str());
        return;
      }
      error = errno;
    }
  }
  if (error == EEXIST) {
    throw Error(output + " appeared while it was written, and is not replaced: give --overwrite (-f) to replace it");
  }
  throw Error("cannot move " + partial + " to " + output + ": " + errno_text(error));
}

}  // namespace rankscope
