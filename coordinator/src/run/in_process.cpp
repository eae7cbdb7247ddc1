#include "run/in_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/model/shard.h"
#include "rankscope/rank_agent/agent.h"
#include "run/agent_environment.h"
#include "run/application.h"
#include "run/shard_folder.h"

namespace rankscope::launch {

namespace fs = std::filesystem;

namespace {

// The `rankscope merge` that makes the timeline of the shards.
std::vector<std::string> merge_command(const fs::path& shard_dir, const RunOptions& options) {
  std::vector<std::string> command = {this_executable().string(), "merge", shard_dir.string(), "-o", options.output};
  if (options.overwrite) command.emplace_back("--overwrite");
  return command;
}

std::string command_line(const std::vector<std::string>& command) {
  std::string line;
  for (const std::string& arg : command) line += (line.empty() ? "" : " ") + arg;
  return line;
}

// The timeline is written by `rankscope merge` in a process of its own, a
// lone MPI process, not a member of the job: everything mpirun told this
// process about the job is left out of its environment.
int merge_in_own_process(std::vector<std::string> command) {
  std::vector<std::string> environment;
  for (char** variable = environ; *variable; ++variable) {
    const std::string_view text(*variable);
    if (text.starts_with("OMPI_") || text.starts_with("PMIX_") || text.starts_with("PMI_") ||
        names_a_launchers_rank(text.substr(0, text.find('=')))) {
      continue;
    }
    environment.emplace_back(text);
  }
  std::vector<char*> envp;
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (std::string& arg : command) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t merger = ::fork();
  if (merger < 0) return -1;
  if (merger == 0) {
    // What the merge says is rankscope's, not the application's output.
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    std::_Exit(127);
  }
  const int status = wait_for(merger);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

// The capture library and the MPI shim need nothing beyond the C and C++
// runtimes and the application's own MPI library. Once the application has
// ended, this process looks at what it left, and on the first rank writes
// the timeline, so no HDF5 or merge code ever enters the application.
int run_in_process(const RunOptions& options, const Identity& id, const fs::path& shard_dir) {
  set_agent_environment(options, id, shard_dir, "inprocess");
  const DeathRecord death;
  const StartedProgram application =
      start_program(options.command, {.preload = {agent_library("librankscope_mpi.so"),
                                                  agent_library("librankscope_capture.so")},
                                      .pid_variable = agent::kEnvAgentPid,
                                      // mpirun ends a job with SIGTERM to the processes it started.
                                      .signals_passed_on = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
                                                            SIGCONT, SIGALRM},
                                      .ends_with_launcher = true});
  rusage usage{};
  ApplicationWatch watch(application.pid, id.rank);
  while (!watch.ended(0, usage)) continue;
  const int status = watch.status();
  DeathRecord::add_stops(shard_dir / shard_file_name(id.rank), application.pid, watch.stops(), id.rank);
  death.add_if_killed(shard_dir / shard_file_name(id.rank), application.pid, status, usage, id.rank);

  // The MPI shim leaves this mark in MPI_Finalize once every rank's shard is
  // complete (docs/run.md).
  const fs::path finalized = shard_dir / shard_file_name(id.rank, agent::kFinalizedSuffix);
  std::error_code ignored;
  // Where the mark could not be made (a full disk, the folder made read-only
  // meanwhile), every rank's shard closed at MPI_Finalize says the same.
  const bool all_complete = fs::exists(finalized, ignored) || (id.rank == 0 && every_rank_finalized(shard_dir, id.world_size));
  int ranks_elsewhere = 0;
  if (std::FILE* mark = std::fopen(finalized.c_str(), "r")) {
    if (std::fscanf(mark, "%d", &ranks_elsewhere) != 1) ranks_elsewhere = 0;
    std::fclose(mark);
  }
  fs::remove(finalized, ignored);
  if (id.rank == 0) {
    const std::vector<std::string> merge = merge_command(shard_dir, options);
    const int exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (!all_complete && !holds_shards(shard_dir)) {
      // Where it could not be run, "cannot run" has said why.
      if (application.exec_error == 0) {
        std::fprintf(stderr, "rankscope run: the application ended (exit status %d) before any rank wrote a shard\n",
                     exit_status);
      }
    } else if (!all_complete) {
      std::fprintf(stderr,
                   "rankscope run: the application ended without calling MPI_Finalize on every rank (exit status %d): "
                   "its shards are kept in %s; merge them with: %s\n",
                   exit_status, shard_dir.c_str(), command_line(merge).c_str());
    } else if (ranks_elsewhere > 0) {
      report_unshared_folder(shard_dir, options.output, ranks_elsewhere, id.world_size);
    } else if (merge_in_own_process(merge) != 0) {
      std::fprintf(stderr, "rankscope run: writing the timeline failed; the shards stay in %s for: %s\n",
                   shard_dir.c_str(), command_line(merge).c_str());
    } else {
      remove_merged_shards(shard_dir, id.world_size);
    }
  }
  // The last rank to get here finds no shard left, as does every rank of a
  // job whose application wrote none (it could not start, say).
  remove_shard_folder(shard_dir);
  return pass_status_on(status);
}

}  // namespace rankscope::launch
