// The shim's life inside the application's MPI: set up after MPI_Init, the
// clocks synchronised then, during the run where a thread can (mpi_clock_rounds.cpp)
// and at MPI_Finalize, its own costs and counts added
// to the shard, and the shard closed at MPI_Finalize or MPI_Abort.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "mpi_shim.h"
#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"
#include "rankscope/rank_agent/agent_settings.h"

namespace rankscope::agent {

[[gnu::tls_model("initial-exec")]] constinit thread_local bool t_in_agent = false;

constexpr uint32_t kNoCaptureBits = 0;
const uint32_t* g_capture_bits = &kNoCaptureBits;

namespace {

[[gnu::constructor]] void find_capture_bits() { g_capture_bits = rankscope_agent_capture_bits(); }

bool g_started = false;
bool g_finalizing = false;  // MPI_Finalize reached: the shard closes inside it
bool g_rounds_running = false;
int g_exit_status = -1;     // exit()'s, or main's return value; -1 until the process exits
int64_t g_started_at = 0;
MPI_Comm g_agent_comm = MPI_COMM_NULL;
clocksync::ClockSynchronizer* g_sync = nullptr;

// What the wrappers counted instead of recording, into the shard's counters.
void add_counters() {
  const PollTotals polls = poll_totals();
  rankscope_agent_add_counter(counter::kMpiPollsUnrecorded.data(), polls.unrecorded);
  rankscope_agent_add_counter(counter::kMpiPollNsUnrecorded.data(), polls.estimated_ns());
  rankscope_agent_add_counter(counter::kMpiPollsTimed.data(), polls.timed);
  rankscope_agent_add_counter(counter::kMpiRequestsUntracked.data(), g_requests->untracked() + g_persistent->untracked());
  // MPI was started and the rank ended without MPI_Finalize (exit, a return
  // from main, _exit): its peers may have waited for it in vain.
  if (g_started && !g_finalizing) {
    rankscope_agent_add_counter(counter::kMpiNotFinalized.data(), 1);
    if (g_exit_status >= 0) rankscope_agent_add_counter(counter::kExitStatus.data(), static_cast<uint64_t>(g_exit_status));
  }
}

// Registered after MPI_Init, so it runs before the agent's own exit handler
// closes the shard: the status then reaches add_counters.
void remember_exit_status(int status, void*) { g_exit_status = status & 0xff; }

void set_up_after_init() {
  if (!rankscope_agent_capturing(kCaptureMpi) && rankscope_agent_shard_path()[0] == '\0') return;
  AgentScope agent_calls;
  intern_call_names();
  PMPI_Comm_dup(MPI_COMM_WORLD, &g_agent_comm);
  PMPI_Comm_set_errhandler(g_agent_comm, MPI_ERRORS_RETURN);
  set_up_comms();
  set_up_message_counters();
  g_requests = new RequestTable();
  g_persistent = new RequestTable();
  rankscope_agent_at_close(add_counters);
  ::on_exit(remember_exit_status, nullptr);
  const AgentSettings* settings = rankscope_agent_settings();
  g_show_waits = settings && settings->hang_timeout_s > 0;

  const clocksync::Placement where = clocksync::placement(g_agent_comm);
  rankscope_agent_set_placement(where.world_size, where.local_rank, where.local_size, where.node_id);
  rankscope_agent_set_job_start(clocksync::job_start_wall_ns(g_agent_comm));
  g_started = true;
}

void measure_clock() {
  AgentScope agent_calls;
  try {
    if (!g_sync) {
      // The agent's base clock, not one of this library's own: a calibration
      // of the TSC made here would be another clock than the events'.
      const auto base = clocksync::BaseClock::parse(rankscope_agent_clock_base());
      g_sync = new clocksync::ClockSynchronizer(g_agent_comm, clocksync::Clock::for_rank(g_world_rank, base));
    }
    if (const auto point = g_sync->round()) rankscope_agent_add_sync_point(&*point);
    else std::fprintf(stderr, "rankscope agent: rank %d: clock sync round failed: %s\n", g_world_rank, g_sync->error().c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "rankscope agent: rank %d: clock sync failed: %s\n", g_world_rank, e.what());
  }
}

void add_cost(std::string_view counter, int64_t since) {
  rankscope_agent_add_counter(counter.data(), static_cast<uint64_t>(now() - since));  // the names are literals
}

// Every rank closes its shard; once all are complete, each leaves the mark
// `rankscope run` merges them on (the merge runs outside the application).
// The mark holds how many ranks wrote their shards into a folder rank 0
// cannot see (nodes without a shared file system): rank 0 then leaves the
// shards where they are instead of merging only its own node's.
void close_shard(int64_t own_work) {
  AgentScope agent_calls;
  add_cost(counter::kCostMpiFinalizeNs, own_work);
  int complete = rankscope_agent_finish() ? 1 : 0, all_complete = 0;
  // Idle: other ranks may still be measuring their clocks.
  MPI_Request request;
  PMPI_Iallreduce(&complete, &all_complete, 1, MPI_INT, MPI_MIN, g_agent_comm, &request);
  clocksync::wait_idle(request);
  const AgentSettings* settings = rankscope_agent_settings();
  const std::string shard_dir = settings ? settings->shard_dir : "";
  if (!all_complete) return;
  const int elsewhere = clocksync::ranks_not_sharing_folder(g_agent_comm, shard_dir);
  if (shard_dir.empty()) return;
  const std::string mark = shard_dir + "/" + shard_file_name(g_world_rank, kFinalizedSuffix);
  if (std::FILE* file = std::fopen(mark.c_str(), "w")) {
    std::fprintf(file, "%d\n", elsewhere);
    std::fclose(file);
  }
}

}  // namespace

void start_after_init(Call call, int64_t call_began) {
  const int64_t own_work = now();
  set_up_after_init();
  if (!g_started) return;
  measure_clock();
  {
    // The application's first calls begin after the last measurement: a
    // rank done early would spin in them, beside pairs still measuring.
    AgentScope agent_calls;
    clocksync::idle_barrier(g_agent_comm);
  }
  {
    AgentScope agent_calls;
    g_rounds_running = start_clock_rounds(g_agent_comm, measure_clock);
  }
  g_started_at = now();
  if (capturing()) {  // else no poll is counted, and none needs a cost
    if (const std::optional<uint64_t> poll_ps = calibrate_poll_cost_ps(g_agent_comm))
      rankscope_agent_add_counter(counter::kCostPollPs.data(), *poll_ps);
    else
      rankscope_agent_add_counter(counter::kCostPollUnresolved.data(), 1);
  }
  record_call(call, call_began);
  add_cost(counter::kCostMpiInitNs, own_work);
}

void stop_before_finalize() {
  if (!g_started) return;
  g_finalizing = true;
  stop_quick_polls();  // this thread's are counted before the totals are taken
  const int64_t begin = now();
  {
    AgentScope agent_calls;
    // The application's last calls end before the last measurement, and no
    // rank spins in this wait beside the pairs measuring.
    clocksync::idle_barrier(g_agent_comm);
  }
  record_call(Call::kFinalize, begin);
  const int64_t own_work = now();
  {
    AgentScope agent_calls;
    stop_clock_rounds();
  }
  // A run longer than a round's interval without rounds has its clock corrected by a straight line
  // between its two ends, whatever the clock did between them.
  if (!g_rounds_running && static_cast<double>(own_work - g_started_at) > clock_round_settings().interval_s * 1e9)
    rankscope_agent_add_counter(counter::kClockMeasuredAtEndsOnly.data(), 1);
  measure_clock();
  close_shard(own_work);
  AgentScope agent_calls;
  delete g_sync;
  g_sync = nullptr;
  PMPI_Comm_free(&g_agent_comm);
  tear_down_comms();
  g_started = false;
}

// The rank shows as aborted with its code, and its shard is whole: MPI_Abort
// does not return, and mpirun then kills every rank.
void stop_at_abort(int errorcode) {
  if (!g_started) return;
  record_call(Call::kAbort, now());
  AgentScope agent_calls;
  rankscope_agent_add_counter(counter::kMpiAborted.data(), 1);
  rankscope_agent_add_counter(counter::kMpiAbortCode.data(), static_cast<uint32_t>(errorcode));
  rankscope_agent_finish();
}

}  // namespace rankscope::agent
