#include "run/sidecar.h"

#include <mpi.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "commands/command.h"
#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/merge/merge.h"
#include "rankscope/merge/problems_text.h"
#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"
#include "rankscope/rank_agent/agent.h"
#include "run/agent_environment.h"
#include "run/application.h"
#include "run/network.h"
#include "run/shard_folder.h"

namespace rankscope::launch {

namespace fs = std::filesystem;

namespace {

std::string broadcast_string(std::string text, int root) {
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, root, MPI_COMM_WORLD);
  text.resize(static_cast<size_t>(length));
  MPI_Bcast(text.data(), length, MPI_CHAR, root, MPI_COMM_WORLD);
  return text;
}

// torchrun, by its own name or as `python -m torch.distributed.run` (or
// torch.distributed.launch): its workers, not it, are the job's ranks.
bool is_torchrun(const std::vector<std::string>& command) {
  if (fs::path(command.at(0)).filename() == "torchrun") return true;
  for (size_t i = 1; i + 1 < command.size(); ++i) {
    if (command[i] == "-m") return command[i + 1] == "torch.distributed.run" || command[i + 1] == "torch.distributed.launch";
  }
  return false;
}

// Sets `name` unless the user did.
void set_unless_given(const char* name, const std::string& value) {
  if (const char* given = std::getenv(name); !given || !*given) set_variable(name, value);
}

class Sidecar {
 public:
  Sidecar(const RunOptions& options, const Identity& launched, const fs::path& shard_dir)
      : options_(options), shard_dir_(shard_dir) {
    MPI_Comm_rank(MPI_COMM_WORLD, &id_.rank);
    const clocksync::Placement where = clocksync::placement(MPI_COMM_WORLD);
    id_.world_size = where.world_size;
    id_.local_rank = where.local_rank;
    id_.local_size = where.local_size;
    id_.launcher = launched.launcher;
    id_.job_id = launched.job_id;
    node_id_ = where.node_id;
    torchrun_ = is_torchrun(options.command);
    worker_list_ = shard_dir / worker_list_name(id_.rank);
    std::error_code ignored;
    fs::remove(worker_list_, ignored);  // an earlier job's, which its shards left behind
    job_start_wall_ns_ = clocksync::job_start_wall_ns(MPI_COMM_WORLD);
    // The program waits only for the sidecars' last round, at its exit (the
    // first has no earlier measurement to go on for): the reference may try
    // longer for a narrow bound on a busy node.
    sync_.emplace(MPI_COMM_WORLD, clocksync::Clock::for_rank(id_.rank),
                  clocksync::SyncOptions{.reference_patience_ms = 100});
  }

  int run() {
    measure();
    const std::string master_addr = broadcast_string(id_.rank == 0 ? master_address() : "", 0);
    int master_port = id_.rank == 0 ? given_or_free_port() : 0;
    MPI_Bcast(&master_port, 1, MPI_INT, 0, MPI_COMM_WORLD);

    const DeathRecord death;
    const StartedProgram program = start_child(master_addr, master_port);
    rusage usage{};
    ApplicationWatch watch(program.pid, id_.rank);
    wait_with_sync_rounds(watch, usage);
    const int status = watch.status();
    // torchrun's workers, not torchrun, write the shards.
    if (!torchrun_) {
      DeathRecord::add_stops(shard_dir_ / shard_file_name(id_.rank), program.pid, watch.stops(), id_.rank);
      death.add_if_killed(shard_dir_ / shard_file_name(id_.rank), program.pid, status, usage, id_.rank);
    }
    measure();
    // A program that could not be run wrote no shard to add them to.
    if (program.exec_error == 0) append_measurements();
    int started = program.exec_error == 0 ? 1 : 0, ranks_started = 0;
    MPI_Allreduce(&started, &ranks_started, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (ranks_started > 0) write_timeline();
    else if (id_.rank == 0) remove_shard_folder(shard_dir_);
    return status;
  }
 private:
  StartedProgram start_child(const std::string& master_addr, int master_port) {
    set_agent_environment(options_, id_, shard_dir_, "sidecar");
    // The program's events go on the clock this process measures (its TSC
    // calibration, not one the program would make of its own).
    set_variable(clocksync::kClockBaseVariable, clocksync::process_base_clock().text());
    set_variable(agent::kEnvNodeId, std::to_string(node_id_));
    set_variable(agent::kEnvJobStart, std::to_string(job_start_wall_ns_));
    if (!torchrun_) {  // torchrun gives its workers these itself; it takes none of them
      set_variable("RANK", std::to_string(id_.rank));
      set_variable("WORLD_SIZE", std::to_string(id_.world_size));
      set_variable("LOCAL_RANK", std::to_string(id_.local_rank));
      set_variable("LOCAL_WORLD_SIZE", std::to_string(id_.local_size));
      set_variable("MASTER_ADDR", master_addr);
      set_variable("MASTER_PORT", std::to_string(master_port));
    } else {
      // One torchrun per node, one node per sidecar: torchrun's own
      // rendezvous, as its PET_ variables set its options (where the
      // command line gives none).
      set_unless_given("PET_NNODES", std::to_string(id_.world_size));
      set_unless_given("PET_NODE_RANK", std::to_string(id_.rank));
      set_unless_given("PET_MASTER_ADDR", master_addr);
      set_unless_given("PET_MASTER_PORT", std::to_string(master_port));
      set_variable(agent::kEnvWorkerList, worker_list_.string());
    }
    // mpirun passes SIGUSR1 and SIGUSR2 on to the processes it started: they
    // are the program's (a checkpoint, a profiler's trigger), not the end of
    // this sidecar, which they would be by default.
    return start_program(options_.command, {.preload = {agent_library("librankscope_sidecar_guard.so"),
                                                        agent_library("librankscope_capture.so")},
                                            .pid_variable = torchrun_ ? agent::kEnvWorkersOf : agent::kEnvAgentPid,
                                            .signals_passed_on = {SIGUSR1, SIGUSR2}});
  }

  // Every sidecar takes part in every round, so they tick together: each
  // tick, an allreduce says whether any application still runs.
  void wait_with_sync_rounds(ApplicationWatch& watch, rusage& usage) {
    using Clock = std::chrono::steady_clock;
    constexpr auto kTick = std::chrono::milliseconds(100);
    auto next_round = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(options_.agent.sync_interval_s));
    bool running = true;
    for (;;) {
      if (running && watch.ended(WNOHANG, usage)) running = false;
      // {still running, round due} here; anywhere, after. Idle: the
      // sidecars' cores are the application's.
      int mine[2] = {running ? 1 : 0, Clock::now() >= next_round ? 1 : 0}, anywhere[2] = {0, 0};
      MPI_Request request;
      MPI_Iallreduce(mine, anywhere, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &request);
      clocksync::wait_idle(request);
      if (!anywhere[0]) return;
      if (anywhere[1]) {
        measure();
        next_round = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.agent.sync_interval_s));
      }
      std::this_thread::sleep_for(kTick);
    }
  }

  void measure() {
    if (const auto point = sync_->round()) points_.push_back(*point);
    else std::fprintf(stderr, "rankscope run: rank %d: %s\n", id_.rank, sync_->error().c_str());
    // Every sidecar leaves the round once all have measured, and none spins
    // meanwhile beside pairs still measuring.
    clocksync::idle_barrier(MPI_COMM_WORLD);
  }

  // The shards this sidecar's program wrote: its own rank's, or those of
  // torchrun's workers (each on this node's clock), as they listed them.
  std::vector<fs::path> program_shards() const {
    if (!torchrun_) return {shard_dir_ / shard_file_name(id_.rank)};
    std::vector<fs::path> shards;
    std::FILE* list = std::fopen(worker_list_.c_str(), "r");
    if (!list) return shards;
    char line[256];
    while (std::fgets(line, sizeof(line), list)) {
      const std::string name(line, ::strcspn(line, "\n"));
      // A restarted worker lists its shard again.
      if (is_shard_file(name) && std::ranges::find(shards, shard_dir_ / name) == shards.end()) {
        shards.push_back(shard_dir_ / name);
      }
    }
    std::fclose(list);
    return shards;
  }

  // The measurements go into the program's shards, after what they wrote.
  void append_measurements() {
    shards_ = program_shards();
    for (const fs::path& shard : shards_) {
      ShardWriter writer;
      if (!writer.open_existing(shard.string()) ||
          !writer.write_sync_points(points_, clocksync::Clock::for_rank(id_.rank).now_ns())) {
        std::fprintf(stderr, "rankscope run: rank %d: cannot add clock measurements to %s: %s\n", id_.rank,
                     shard.c_str(), writer.error().c_str());
      }
    }
  }

  void write_timeline() {
    if (const int elsewhere = clocksync::ranks_not_sharing_folder(MPI_COMM_WORLD, shard_dir_.string()); elsewhere > 0) {
      if (id_.rank == 0) report_unshared_folder(shard_dir_, options_.output, elsewhere, id_.world_size);
      return;
    }
    try {
      MergeOptions merge;
      merge.inputs = {shard_dir_.string()};
      merge.output = options_.output;
      merge.replace_output = options_.overwrite;
      merge.derive_tables = cli::matched_collectives_writer("run");
      const MergeResult result = merge_shards(MPI_COMM_WORLD, merge);
      if (id_.rank == 0) {
        std::fputs((merge_warnings_text(result, "run") + missing_and_dead_ranks_text(result, "shard")).c_str(), stderr);
        std::fprintf(stderr, "rankscope run: timeline %s: %d ranks, %llu events (merged in %.2f s)\n",
                     options_.output.c_str(), result.world_size, static_cast<unsigned long long>(result.events),
                     result.seconds);
      }
      if (result.dead_ranks.empty()) {
        std::error_code ignored;
        for (const fs::path& shard : shards_) fs::remove(shard, ignored);
        fs::remove(worker_list_, ignored);
        MPI_Barrier(MPI_COMM_WORLD);
        if (id_.rank == 0) {
          remove_shard_folder(shard_dir_);
          report_earlier_runs();
        }
      }
    } catch (const Error& e) {
      if (id_.rank == 0) {
        // A folder with no shard (the application could not start, say) is no result to keep.
        if (holds_shards(shard_dir_)) {
          std::fprintf(stderr, "rankscope run: writing the timeline failed: %s; the shards stay in %s for `rankscope merge`\n",
                       e.what(), shard_dir_.c_str());
        } else {
          remove_shard_folder(shard_dir_);
          std::fprintf(stderr, "rankscope run: writing the timeline failed: %s\n", e.what());
        }
      }
    }
  }

  // torchelastic's restarts leave the workers' earlier runs in restart-N/.
  void report_earlier_runs() const {
    std::error_code ignored;
    for (const auto& entry : fs::directory_iterator(shard_dir_, ignored)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_directory() || !name.starts_with(agent::kRestartFolderPrefix)) continue;
      std::fprintf(stderr,
                   "rankscope run: torchelastic restarted workers; the timeline holds their last run, and an earlier "
                   "one's shards are kept in %s (rankscope merge %s -o %s.h5)\n",
                   entry.path().c_str(), entry.path().c_str(), name.c_str());
    }
  }

  const RunOptions& options_;
  fs::path shard_dir_;
  Identity id_;
  bool torchrun_ = false;
  fs::path worker_list_;  // torchrun's workers list their shards here
  std::vector<fs::path> shards_;  // what the program wrote
  int node_id_ = 0;
  int64_t job_start_wall_ns_ = 0;
  std::optional<clocksync::ClockSynchronizer> sync_;
  std::vector<SyncPoint> points_;
};

}  // namespace

int run_sidecar(const RunOptions& options, const Identity& id, const fs::path& shard_dir) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided);
  // Refused by every rank together, before anything is written or run: a
  // rank that went on alone would wait for the others.
  std::exception_ptr refusal;
  try {
    int world_size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    // Rank 0 alone would run its program as a job of one, and the others not at all.
    check_launcher_joined(world_size, LoneRankZero::kRefused);
    prepare_shard_folder(shard_dir, id);
  } catch (const Error&) {
    refusal = std::current_exception();
  }
  int refused = refusal ? 1 : 0, refused_anywhere = 0;
  MPI_Allreduce(&refused, &refused_anywhere, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (refused_anywhere) {
    // The folder this rank made and claimed is no earlier job's record: the
    // next job must find it free. Before MPI_Finalize, which the refusing
    // rank leaves only after every rank came: its exit has mpirun end the
    // others, and a rank ended first would leave its claim behind.
    if (!refusal) remove_shard_folder(shard_dir);
    MPI_Finalize();
    if (refusal) std::rethrow_exception(refusal);
    return kRunErrorStatus;  // the rank that refused says why
  }
  int status = 0;
  try {
    Sidecar sidecar(options, id, shard_dir);
    status = sidecar.run();
  } catch (const Error& e) {
    std::fprintf(stderr, "rankscope run: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return pass_status_on(status);
}

}  // namespace rankscope::launch
