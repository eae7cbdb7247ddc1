// Measuring every rank's offset to rank 0's clock over MPI.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "rankscope/clocksync/clock.h"

namespace rankscope::clocksync {

// Where a rank sits: its node, numbered in the order of the nodes' first ranks.
struct Placement {
  int world_size = 1;
  int local_rank = 0;
  int local_size = 1;
  int node_id = 0;
};

// Collective over `comm`.
Placement placement(MPI_Comm comm);

// Collective over `comm`: rank 0's wall clock (CLOCK_REALTIME, ns since the
// epoch) now, the same on every rank. Taken at MPI_Init, it is when the job
// started as all its ranks agree, part of the job's identity.
int64_t job_start_wall_ns(MPI_Comm comm);

// Collective over `comm`: how many ranks do not see rank 0's `folder` as
// theirs (0 when it is on a file system every node shares; the ranks of other
// nodes otherwise, each of which has a folder of that name on its own disk).
// Rank 0 puts a file of a name no one has looked up before into it, so no
// client's cache of a shared file system can hide it. 0 too when rank 0
// cannot write there: then nothing is known to differ.
int ranks_not_sharing_folder(MPI_Comm comm, const std::string& folder);

// Completes `request` by `deadline` (MPI_Wtime), or returns false, sleeping
// between polls instead of spinning. Every wait of a rank that is not half of
// a timed exchange, during a round and right after it, must be of this kind:
// on a node with fewer cores than ranks (and on the test hosts, which share
// one machine's cores), a rank that spins takes the core a timed pair needs,
// and round trips grow from tens of microseconds to the scheduler's
// milliseconds. A poll costs microseconds; the sleep grows to
// `longest_sleep_ns`, 0.2 ms unless a wait can answer later than that.
bool wait_idle(MPI_Request& request, double deadline = std::numeric_limits<double>::infinity(),
               long longest_sleep_ns = 200'000);

// Collective over `comm`: a barrier that its ranks wait out with wait_idle.
void idle_barrier(MPI_Comm comm);

struct SyncOptions {
  int warmup_exchanges = 4;    // cold paths: discarded
  int max_exchanges = 32;
  int stable_exchanges = 8;    // stop once the best round trip has not improved for this many
  int timeout_ms = 5000;       // a peer silent this long is given up for the round
  // A bound still wider than this after the exchanges above earns more
  // exchanges, a pause apart, until it is narrower or patience_ms passed:
  // no longer, as the parent's later children are charged drift for the
  // time. The reference's patience costs them nothing, only the round's
  // time: it goes on to reference_patience_ms while the bound is over half
  // as wide again as the pair's narrowest in earlier rounds, a link shown
  // to do better (where the link's own round trip is wide, every round
  // would otherwise spend it all).
  int64_t wide_bound_ns = 25'000;
  int patience_ms = 10;
  int reference_patience_ms = 10;
};

// Whether a measurement whose bound is still `bound_ns`, `elapsed_ms` into
// its extra exchanges, earns another, by the patience above; `reference`:
// the parent is the reference; `narrowest_earlier_ns`: the pair's narrowest
// bound in earlier rounds, where there were any.
bool earns_another_exchange(const SyncOptions& options, int64_t bound_ns, double elapsed_ms, bool reference,
                            std::optional<int64_t> narrowest_earlier_ns);

// Relative drift the composition along the tree allows for between a parent's
// own measurement and its child's (both taken within microseconds).
inline constexpr double kMaxRelativeDriftPpm = 1000.0;

// Measures this rank's offset to the clock of rank 0 of a communicator, as
// often as asked. Ranks that read one clock (same node, same base clock, no
// virtual clock) take their node leader's result; node leaders measure down a
// binomial tree, so a round costs O(log nodes) exchanges in sequence. Where
// the ranks of some node read different clocks, every rank is measured. The
// communicators this needs are made once, at construction.
class ClockSynchronizer {
 public:
  // Collective over `comm`, which must outlive this object.
  ClockSynchronizer(MPI_Comm comm, const Clock& clock, const SyncOptions& options = {});
  ClockSynchronizer(const ClockSynchronizer&) = delete;
  ClockSynchronizer& operator=(const ClockSynchronizer&) = delete;
  ~ClockSynchronizer();

  // Collective over the communicator: this rank's offset to rank 0's clock,
  // now. Nothing when no measurement reached this rank (a peer on its path
  // to rank 0 fell silent past the timeout, or MPI failed); error() says why.
  // A silent peer never makes a round wait longer than the timeout per level.
  std::optional<SyncPoint> round();
  const std::string& error() const { return error_; }

 private:
  void connect_tree_pairs();
  std::optional<SyncPoint> tree_round();
  std::optional<SyncPoint> learn(int parent, int levels_above);
  void teach(int child, const std::optional<SyncPoint>& own);
  // spin: half of a timed exchange, answering at once; idle: sleeps between polls.
  enum class Wait { spin, idle };
  template <typename Message>
  bool receive(int source, int tag, Message& message, double deadline, Wait wait);
  void fail(std::string message);

  Clock clock_;
  SyncOptions options_;
  int64_t round_ = 0;
  std::string error_;
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Comm tree_ = MPI_COMM_NULL;  // every rank, or node leaders only; null on other ranks
  bool shares_leader_clock_ = false;
  std::map<int, int64_t> narrowest_bound_;  // per child this rank teaches: its narrowest measurement's bound so far
};

}  // namespace rankscope::clocksync
