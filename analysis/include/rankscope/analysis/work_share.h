// The processes a profile's reading is shared among (`mpirun -n K rankscope
// report`): each reads and sweeps some of the ranks, and every process ends
// with the whole profile, the same as one process alone would build.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace rankscope::analysis {

struct WorkShare {
  int process = 0;
  int processes = 1;
  // Every process's bytes, in process order. Every process calls it at the
  // same points; a lone process needs none.
  std::function<std::vector<std::string>(const std::string& local)> allgather;
};

// Every process's bytes from `local`, in process order. An Error thrown by
// `local` on any process is thrown on every process (the lowest one's), so
// that none waits for a process that gave up.
std::vector<std::string> exchange(const WorkShare& share, const std::function<std::string()>& local);

}  // namespace rankscope::analysis
