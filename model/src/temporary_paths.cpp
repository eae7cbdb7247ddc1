#include "rankscope/model/temporary_paths.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "rankscope/model/error.h"

namespace rankscope {
namespace {

// A signal handler may not take a lock or free memory; the watching thread
// may, so removal happens there, with the full filesystem library.
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
      {
        std::lock_guard<std::mutex> lock(g_mutex);
        for (const std::string& path : registered_paths()) remove_quietly(path);
      }
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
