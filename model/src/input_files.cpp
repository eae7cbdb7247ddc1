#include "rankscope/model/input_files.h"

#include <algorithm>
#include <filesystem>

#include "rankscope/model/error.h"

namespace rankscope {

std::vector<std::string> expand_folders(const std::vector<std::string>& inputs, bool (*wanted)(std::string_view name),
                                        std::string_view what) {
  std::vector<std::string> out;
  for (const auto& input : inputs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(input, ec)) {
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
