// Who this process is in the job, as the launcher that started it says.
#pragma once

#include <string>
#include <string_view>

namespace rankscope::launch {

struct Identity {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string launcher = "none";
  std::string job_id;  // the launcher's name for the job; empty when it names none
};

// From the variables of the innermost launcher that set any (torchrun,
// Open MPI, PMI, Slurm), and the job's name from the first that names it.
Identity launch_identity();

// A variable by which a launcher tells its process who it is in the job.
bool names_a_launchers_rank(std::string_view name);

}  // namespace rankscope::launch
