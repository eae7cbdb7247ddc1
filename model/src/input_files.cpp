#include "rankscope/model/input_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "rankscope/model/error.h"

namespace rankscope {

const char* file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "an unknown kind of file";
}

void require_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  throw Error("cannot read " + path + ": it is " + file_type_name(st.st_mode) + ", not a regular file");
}

std::vector<std::string> expand_folders(const std::vector<std::string>& inputs, bool (*wanted)(std::string_view name),
                                        std::string_view what) {
  std::vector<std::string> out;
  for (const auto& input : inputs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(input, ec)) {
      require_regular_file(input);
      out.push_back(input);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(input, ec)) {
      if (entry.is_regular_file() && wanted(entry.path().filename().string())) found.push_back(entry.path().string());
    }
    if (ec) throw Error("cannot list " + input + ": " + ec.message());
    if (found.empty()) throw Error(input + " holds no " + std::string(what));
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

}  // namespace rankscope
