// Files and folders a command makes only while it runs (an output's .partial
// file, the shards of an import): whoever makes one removes it when done or
// failing, and a signal that ends the process removes it too, so that nothing
// abnormal leaves them behind.
#pragma once

#include <functional>
#include <string>

namespace rankscope {

// Removes `path` (a file, or a folder with all it holds) when destroyed, and
// when a signal ends the process meanwhile (see remove_temporary_paths_on_signals).
class TemporaryPath {
 public:
  explicit TemporaryPath(std::string path);
  TemporaryPath(const TemporaryPath&) = delete;
  TemporaryPath& operator=(const TemporaryPath&) = delete;
  ~TemporaryPath();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Puts a finished `partial` in place as `output`. Unless `replace`, an
// `output` that appeared while it was written (made by another command, or by
// the program profiled) is not written over: Error, and `partial` stays for
// its owner to remove.
void move_into_place(const std::string& partial, const std::string& output, bool replace);

// From now on SIGINT, SIGTERM and SIGHUP (those not ignored) remove every
// TemporaryPath, then end the process as the signal would have. Call it
// before the process starts any thread: a thread watches for the signals,
// which every other thread must inherit blocked. Not for a process that
// starts other programs, which would inherit them blocked too.
void remove_temporary_paths_on_signals();

// While it lives, what the process says when such a signal ends it, before
// the paths are removed: called on the watching thread, so it may lock and
// allocate, but must not wait on what the signal interrupted (MPI above all).
// One at a time.
class LastWords {
 public:
  explicit LastWords(std::function<void(int signal_number)> words);
  LastWords(const LastWords&) = delete;
  LastWords& operator=(const LastWords&) = delete;
  ~LastWords();
};

}  // namespace rankscope
