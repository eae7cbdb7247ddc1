// The exporter's output file: written as OUTPUT.partial and renamed when
// complete, so an output that exists is whole (as the merge does with
// timelines). Full buffers are handed over and written by a background
// thread while the exporter fills the next one, so the copy into the page
// cache overlaps the encoding.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

namespace rankscope::export_detail {

class OutputFile {
 public:
  // Unless `replace`, a file that appears at `path` meanwhile is not written
  // over (move_into_place). Throws Error naming the path.
  OutputFile(std::string path, bool replace);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // removes the partial file unless committed

  // Takes buffer[0, size) to be written, and gives back a buffer to fill
  // next (one written before, so its capacity is reused). Throws Error
  // naming the path when an earlier write failed.
  void submit(std::string& buffer, size_t size);
  void commit();  // writes what is left, closes and renames; throws Error
  uint64_t bytes() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  void write_loop();
  void write_all(const char* data, size_t size);  // on the writer thread
  void wait_until_written();                      // and rethrow its error

  std::string path_, partial_;
  bool replace_ = false;
  int fd_ = -1;
  uint64_t bytes_ = 0;  // submitted
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string pending_;        // submitted, not yet written
  size_t pending_size_ = 0;
  bool has_pending_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread writer_;
};

// A folder output (export_writes_folder): written as OUTPUT.partial/ and
// renamed when complete. Where OUTPUT exists it is an empty folder or, with
// `replace`, an earlier export of the format (the command checked which), and
// the complete folder takes its place.
class OutputFolder {
 public:
  // Makes OUTPUT.partial/; throws Error naming it.
  OutputFolder(std::string path, bool replace);
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;
  ~OutputFolder();  // removes the partial folder unless committed

  // Where the file `name` goes while the folder is written.
  std::string file(const std::string& name) const { return partial_ + "/" + name; }
  const std::string& path() const { return path_; }
  const std::string& partial() const { return partial_; }
  void commit();  // counts the bytes written and renames; throws Error
  uint64_t bytes() const { return bytes_; }

 private:
  std::string path_, partial_;
  bool replace_ = false;
  bool committed_ = false;
  uint64_t bytes_ = 0;
};

}  // namespace rankscope::export_detail
