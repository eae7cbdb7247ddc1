#include "rankscope/analysis/work_share.h"

#include "rankscope/model/error.h"

namespace rankscope::analysis {

std::vector<std::string> exchange(const WorkShare& share, const std::function<std::string()>& local) {
  if (!share.allgather) return {local()};
  std::string bytes, error;
  try {
    bytes = local();
  } catch (const Error& e) {
    error = e.what();
  }
  // The errors first, apart: the bytes may be large, and are not copied to be marked.
  for (const std::string& other : share.allgather(error)) {
    if (!other.empty()) throw Error(other);
  }
  return share.allgather(bytes);
}

}  // namespace rankscope::analysis
