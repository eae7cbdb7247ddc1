#include "export_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "rankscope/model/error.h"
#include "rankscope/model/temporary_paths.h"

namespace rankscope::export_detail {

OutputFile::OutputFile(std::string path, bool replace)
    : path_(std::move(path)), partial_(path_ + ".partial"), replace_(replace) {
  fd_ = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot write " + partial_ + ": " + errno_text(errno));
  writer_ = std::thread([this] { write_loop(); });
}

OutputFile::~OutputFile() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(partial_.c_str());
}

void OutputFile::submit(std::string& buffer, size_t size) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !has_pending_ || error_; });
  if (error_) std::rethrow_exception(error_);
  pending_.swap(buffer);
  pending_size_ = size;
  has_pending_ = true;
  bytes_ += size;
  lock.unlock();
  changed_.notify_all();
}

void OutputFile::write_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  std::string writing;
  while (true) {
    changed_.wait(lock, [&] { return has_pending_ || stopping_; });
    if (!has_pending_) return;
    writing.swap(pending_);
    const size_t size = pending_size_;
    lock.unlock();
    std::exception_ptr error;
    try {
      write_all(writing.data(), size);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    // The written buffer becomes the next one to fill, keeping its capacity.
    pending_.swap(writing);
    has_pending_ = false;
    if (error) error_ = error;
    changed_.notify_all();
  }
}

void OutputFile::write_all(const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("cannot write " + partial_ + ": " + errno_text(n < 0 ? errno : ENOSPC));
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void OutputFile::wait_until_written() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !has_pending_; });
  if (error_) std::rethrow_exception(error_);
}

void OutputFile::commit() {
  wait_until_written();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(partial_.c_str());
    throw Error("cannot write " + partial_ + ": " + errno_text(error));
  }
  try {
    move_into_place(partial_, path_, replace_);
  } catch (const Error&) {
    ::unlink(partial_.c_str());
    throw;
  }
}

OutputFolder::OutputFolder(std::string path, bool replace) : path_(std::move(path)), replace_(replace) {
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();  // DIR/ names DIR
  partial_ = path_ + ".partial";
  std::error_code ignored;
  std::filesystem::remove_all(partial_, ignored);  // a partial folder an ended export left
  if (::mkdir(partial_.c_str(), 0755) != 0) throw Error("cannot make the folder " + partial_ + ": " + errno_text(errno));
}

OutputFolder::~OutputFolder() {
  if (committed_) return;
  std::error_code ignored;
  std::filesystem::remove_all(partial_, ignored);
}

void OutputFolder::commit() {
  namespace fs = std::filesystem;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(partial_, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    if (it->is_regular_file(error)) bytes_ += it->file_size(error);
  }
  // What the command checked: OUTPUT is missing, an empty folder, or (with
  // replace) an earlier export. An empty folder is taken as missing; one
  // that filled meanwhile is not written over.
  if (fs::is_directory(path_, error) && (replace_ || fs::is_empty(path_, error))) {
    fs::remove_all(path_, error);
    if (error) throw Error("cannot replace the folder " + path_ + ": " + error.message());
  }
  move_into_place(partial_, path_, false);
  committed_ = true;
}

}  // namespace rankscope::export_detail
