#include "run/identity.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "rankscope/coordinator/launcher.h"
#include "rankscope/model/error.h"
#include "rankscope/model/text.h"
#include "run/program_check.h"

namespace rankscope::launch {
namespace {

std::optional<int> env_number(const char* name) {
  const char* text = std::getenv(name);
  const auto value = text ? parse_integer<int32_t>(text) : std::nullopt;
  return value && *value >= 0 ? value : std::nullopt;
}

struct Launcher {
  const char* name;
  const char *rank, *size, *local_rank, *local_size;
  const char* only_with;  // set only by this launcher, where its rank variable is a common name; or null
  // Said where rankscope's MPI cannot join the launcher's job: what sets these variables, and what to do instead.
  const char* started_by;
  const char* instead;
};
constexpr const char* kStartWithOpenMpi = "Start rankscope with Open MPI's mpirun, or srun --mpi=pmix";
// The innermost launcher first: torchrun's processes inherit the variables
// of an srun or mpirun that started torchrun itself.
constexpr Launcher kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "torchrun",
     "Put rankscope between mpirun and torchrun, one per node: mpirun -n NODES --map-by ppr:1:node rankscope run "
     "-- torchrun --nproc-per-node K SCRIPT; or start the job with mpirun in torchrun's place (mpirun -n PROCESSES "
     "rankscope run -- python SCRIPT): sidecar mode gives the program RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and "
     "MASTER_PORT as torchrun does"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", nullptr, "Open MPI's mpirun", kStartWithOpenMpi},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr,
     "MPICH's or Intel MPI's mpiexec, or srun --mpi=pmi2", kStartWithOpenMpi},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", nullptr,
     "srun without --mpi=pmix", kStartWithOpenMpi},
};

}  // namespace

bool names_a_launchers_rank(std::string_view name) {
  return std::ranges::any_of(kLaunchers, [&](const Launcher& l) {
    return name == l.rank || name == l.size || (l.only_with && name == l.only_with);
  });
}

Identity launch_identity() {
  // The launcher's name for the job, the same in every rank of it: the first
  // of these that is set (Slurm's with its step, one srun of the job).
  struct JobName {
    const char* prefix;
    const char *variable, *step;
  };
  static constexpr JobName kJobNames[] = {
      {"openmpi:", "OMPI_MCA_ess_base_jobid", nullptr},  // mpirun of Open MPI 3 and 4
      {"openmpi:", "OMPI_MCA_orte_ess_jobid", nullptr},  // older Open MPI
      {"pmix:", "PMIX_NAMESPACE", nullptr},              // prterun (Open MPI 5), srun --mpi=pmix
      {"slurm:", "SLURM_JOB_ID", "SLURM_STEP_ID"},
      {"torchelastic:", "TORCHELASTIC_RUN_ID", nullptr},
  };
  Identity id;
  for (const JobName& name : kJobNames) {
    const char* value = std::getenv(name.variable);
    if (!value || !*value) continue;
    const char* step = name.step ? std::getenv(name.step) : nullptr;
    id.job_id = name.prefix + std::string(value) + (step && *step ? "." + std::string(step) : "");
    break;
  }
  for (const Launcher& l : kLaunchers) {
    const auto rank = env_number(l.rank);
    if (!rank || (l.only_with && !std::getenv(l.only_with))) continue;
    id.launcher = l.name;
    id.rank = *rank;
    id.world_size = env_number(l.size).value_or(1);
    id.local_rank = env_number(l.local_rank).value_or(0);
    id.local_size = env_number(l.local_size).value_or(1);
    break;
  }
  return id;
}

}  // namespace rankscope::launch

namespace rankscope {

void check_launcher_joined(int mpi_world_size, LoneRankZero lone_rank_zero) {
  const launch::Identity id = launch::launch_identity();
  // Slurm tells the one process of a batch script that it is task 0 of all the job's tasks: alone, rightly.
  const bool alone_rightly = id.rank == 0 && (lone_rank_zero == LoneRankZero::kGoesOn || id.launcher == "slurm");
  if (mpi_world_size != 1 || id.world_size <= 1 || alone_rightly) return;
  const auto launcher =
      std::ranges::find_if(launch::kLaunchers, [&](const launch::Launcher& l) { return id.launcher == l.name; });
  if (launcher == std::end(launch::kLaunchers)) return;
  throw Error(printf_string("this process is rank %d of %d to its launcher (%s, %s: %s), but alone in its world to "
                            "rankscope's MPI, %s, which cannot join that launcher's jobs: every process would take "
                            "itself for the whole job and write over the others' results. %s",
                            id.rank, id.world_size, launcher->rank, launcher->size, launcher->started_by,
                            launch::mpi_library_version().c_str(), launcher->instead));
}

}  // namespace rankscope
