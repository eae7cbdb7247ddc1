#include "command.h"

#include <malloc.h>
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "rankscope/analysis/profile.h"
#include "rankscope/coordinator/launcher.h"
#include "rankscope/model/error.h"
#include "rankscope/model/format.h"
#include "rankscope/model/steps.h"
#include "rankscope/model/temporary_paths.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::cli {

const CLI::Validator kNonEmptyPath(
    [](const std::string& path) { return path.empty() ? std::string("an empty path names no file") : std::string(); },
    "PATH");

CLI::Validator finite_range(double min, double max) {
  const std::string range = "[" + significant(min) + " - " + significant(max) + "]";
  return CLI::Validator(
      [min, max, range](const std::string& text) {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        const bool number = !text.empty() && *end == '\0' && std::isfinite(value);
        return number && value >= min && value <= max ? std::string() : "Value " + text + " not in range " + range;
      },
      "FLOAT in " + range);
}

CLI::Validator step_selection_check(bool repeats) {
  return CLI::Validator(
      [repeats](const std::string& text) {
        const auto steps = parse_step_selection(text);
        if (steps && (repeats || steps->period == 0)) return std::string();
        return "'" + text + "' is not " +
               (repeats ? std::string(kStepSelectionForms) + ", the period longer than the window"
                        : std::string("A:B, A, A: or :B (step numbers)"));
      },
      repeats ? "A:B[/PERIOD]" : "A:B");
}

bool started_by_mpi_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK");
}

int run_under_mpi(const char* command, LoneRankZero lone_rank_zero,
                  const std::function<void(int process, int processes)>& body) {
  // A lone process, not started by mpirun, needs no network: Open MPI's UCX
  // start-up alone would take 0.2 s of a command that takes less. Settings
  // the user made win.
  if (!started_by_mpi_launcher()) {
    setenv("OMPI_MCA_pml", "ob1", 0);
    setenv("OMPI_MCA_btl", "self", 0);
    setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
    // Isolated singletons share one session folder name: MPI-IO's shared
    // file pointer component would open the same file there for two
    // commands at once and print an error. Nothing here uses shared file
    // pointers.
    setenv("OMPI_MCA_sharedfp", "^sm", 0);
  }
  // Before MPI_Init starts its threads.
  remove_temporary_paths_on_signals();
  // Funneled: the commands read and analyse on threads of their own beside
  // the one that speaks MPI.
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int process = 0, processes = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  MPI_Comm_size(MPI_COMM_WORLD, &processes);
  int status = 0;
  try {
    check_launcher_joined(processes, lone_rank_zero);
    body(process, processes);
  } catch (const UnrecoverableError& e) {
    if (process == 0) std::fprintf(stderr, "rankscope %s: error: %s\n", command, e.what());
    std::fflush(nullptr);
    std::_Exit(1);
  } catch (const Error& e) {
    if (process == 0) std::fprintf(stderr, "rankscope %s: error: %s\n", command, e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}

int run_reporting_errors(const char* command, const std::function<int()>& body, int error_status) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "rankscope %s: error: %s\n", command, e.what());
    return error_status;
  }
}

void keep_freed_memory_for_the_analyses() {
  // Both, and large: on steps of 100,000 kernels the report took 1.7-2.0 s
  // so, 2.0-2.7 s with blocks from 32 MiB up mapped on their own, and
  // 3.7 s with the heap's top kept alone (glibc 2.36).
  const int blocks_from_the_heap = ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  const int top_kept = ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (!blocks_from_the_heap || !top_kept) {
    std::fprintf(stderr, "rankscope: note: the C library refused to keep freed memory for reuse (mallopt): the "
                         "analyses hand it back and fault it in again, which takes longer\n");
  }
}

double job_peak_mib(MPI_Comm comm) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  long peak_kib = usage.ru_maxrss, job_peak_kib = 0;
  MPI_Reduce(&peak_kib, &job_peak_kib, 1, MPI_LONG, MPI_MAX, 0, comm);
  return static_cast<double>(job_peak_kib) / 1024.0;
}

void warn_about_damage(const char* command, const Timeline& timeline) {
  const TimelineDamage damage = timeline.damage();
  if (damage.empty()) return;
  std::fprintf(stderr, "rankscope %s: warning: %s: %s; what it printed or wrote leaves them out (`rankscope info --check %s` lists them)\n",
               command, timeline.path().c_str(), damage.summary().c_str(), timeline.path().c_str());
}

std::function<void(const std::string&)> matched_collectives_writer(const char* command) {
  return [command](const std::string& timeline_path) {
    try {
      analysis::JobProfile profile;
      {
        const Timeline timeline(timeline_path);
        profile = analysis::build_profile(timeline);
      }
      analysis::write_collectives_table(timeline_path, profile);
    } catch (const Error& e) {
      std::fprintf(stderr, "rankscope %s: warning: the timeline has no /collectives table: %s\n", command, e.what());
    }
  };
}

}  // namespace rankscope::cli
