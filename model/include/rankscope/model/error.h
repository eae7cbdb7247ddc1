#pragma once

#include <stdexcept>
#include <string>

namespace rankscope {

// Every reader, the merge and the CLI report failures by throwing Error with a
// message that names the file and the place in it. The capture path never
// throws: it reports through return values (see ShardWriter).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure after which the process must exit without further cleanup: HDF5
// cannot close a file whose final write failed, and tidying up at exit would crash.
class UnrecoverableError : public Error {
 public:
  using Error::Error;
};

// "strerror(errno)" as a std::string, for messages.
std::string errno_text(int error_number);

}  // namespace rankscope
