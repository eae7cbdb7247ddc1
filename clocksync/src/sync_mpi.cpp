#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "rankscope/clocksync/sync_mpi.h"

namespace rankscope::clocksync {
namespace {

constexpr int kTagPing = 31001;
constexpr int kTagPong = 31002;
constexpr int kTagResult = 31003;
constexpr int kTagHello = 31004;
// Between the exchanges of a wide measurement: long enough for the scheduler
// to run another process, short against a round.
constexpr long kPatiencePauseNs = 200'000;
// How long the ranks of a node that take their leader's measurement sleep
// between polls, at most.
constexpr long kNodeMatesLongestSleepNs = 2'000'000;

// Every message names its round, so a late answer to an abandoned round is
// recognised and dropped instead of being taken for a new one.
struct Ping {
  int64_t round;
  int64_t go;  // 1: answer with your clock; 0: the exchanges are over
};
struct Pong {
  int64_t round;
  int64_t child_ns;
};
struct Result {
  int64_t round;
  int64_t measured;  // 0: the parent has no measurement to give
  int64_t local_ns;
  int64_t offset_ns;
  int64_t bound_ns;
};

template <typename Message>
int send(const Message& message, int destination, int tag, MPI_Comm comm) {
  return MPI_Send(&message, sizeof(Message), MPI_BYTE, destination, tag, comm);
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

}  // namespace

bool earns_another_exchange(const SyncOptions& options, int64_t bound_ns, double elapsed_ms, bool reference,
                            std::optional<int64_t> narrowest_earlier_ns) {
  if (bound_ns <= options.wide_bound_ns) return false;
  if (elapsed_ms < options.patience_ms) return true;
  return reference && elapsed_ms < options.reference_patience_ms && narrowest_earlier_ns &&
         bound_ns > *narrowest_earlier_ns * 3 / 2;
}

bool wait_idle(MPI_Request& request, double deadline, long longest_sleep_ns) {
  long sleep_ns = 10'000;
  for (;;) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (MPI_Wtime() > deadline) return false;
    timespec pause{0, sleep_ns};
    while (::nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
    sleep_ns = std::min(sleep_ns * 2, longest_sleep_ns);
  }
}

void idle_barrier(MPI_Comm comm) {
  MPI_Request request;
  MPI_Ibarrier(comm, &request);
  wait_idle(request);
}

ClockSynchronizer::ClockSynchronizer(MPI_Comm comm, const Clock& clock, const SyncOptions& options)
    : clock_(clock), options_(options) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_);
  int node_rank = 0;
  MPI_Comm_rank(node_, &node_rank);
  // Ranks of a node share their leader's measurement only if they read one
  // clock: no virtual clock, and one base clock (two processes that each
  // calibrated the TSC run two clocks, apart by their calibration errors).
  // Anywhere else, every rank takes part.
  const uint64_t identity = clock.base().identity();
  uint64_t node_lowest = 0, node_highest = 0;
  MPI_Allreduce(&identity, &node_lowest, 1, MPI_UINT64_T, MPI_MIN, node_);
  MPI_Allreduce(&identity, &node_highest, 1, MPI_UINT64_T, MPI_MAX, node_);
  int one_clock_here = !clock.is_virtual() && node_lowest == node_highest ? 1 : 0, one_clock_everywhere = 0;
  MPI_Allreduce(&one_clock_here, &one_clock_everywhere, 1, MPI_INT, MPI_MIN, comm);
  shares_leader_clock_ = one_clock_everywhere != 0;
  // A communicator of its own: messages of an abandoned round cannot reach anyone else.
  MPI_Comm_split(comm, !shares_leader_clock_ || node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &tree_);
  if (tree_ != MPI_COMM_NULL) {
    MPI_Comm_set_errhandler(tree_, MPI_ERRORS_RETURN);
    connect_tree_pairs();
  }
  // Every rank leaves together, none still spinning in a blocking call above
  // while the first round's pairs measure beside it on a node with fewer cores
  // than ranks (bounds of 0.1-0.7 ms where 10 us were measured otherwise).
  idle_barrier(comm);
}

// MPI may connect two processes at their first message (Open MPI's TCP
// transport does). In a round, that wait would fall between a parent's own
// measurement and its child's, and the drift allowed for between them would
// widen the child's bound: every pair of the tree exchanges one message here
// first, both ways, idle.
void ClockSynchronizer::connect_tree_pairs() {
  int rank = 0, size = 1;
  MPI_Comm_rank(tree_, &rank);
  MPI_Comm_size(tree_, &size);
  std::vector<int> peers;
  for (int distance = 1; distance < size; distance *= 2) {
    if (rank % (2 * distance) == 0 && rank + distance < size) peers.push_back(rank + distance);
    if (rank % (2 * distance) == distance) peers.push_back(rank - distance);
  }
  static const char kHello = 0;  // outlives a send given up on below
  std::vector<char> inbox(peers.size());
  std::vector<MPI_Request> receives(peers.size()), sends(peers.size());
  for (size_t i = 0; i < peers.size(); ++i) {
    MPI_Irecv(&inbox[i], 1, MPI_CHAR, peers[i], kTagHello, tree_, &receives[i]);
    MPI_Isend(&kHello, 1, MPI_CHAR, peers[i], kTagHello, tree_, &sends[i]);
  }
  // A peer that never answers is found by the rounds' timeouts, not here.
  const double deadline = MPI_Wtime() + options_.timeout_ms * 1e-3;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (!wait_idle(receives[i], deadline)) {
      MPI_Cancel(&receives[i]);
      MPI_Wait(&receives[i], MPI_STATUS_IGNORE);
    }
    if (!wait_idle(sends[i], deadline)) MPI_Request_free(&sends[i]);
  }
}

ClockSynchronizer::~ClockSynchronizer() {
  if (tree_ != MPI_COMM_NULL) MPI_Comm_free(&tree_);
  MPI_Comm_free(&node_);
}

void ClockSynchronizer::fail(std::string message) {
  if (error_.empty()) error_ = "clock sync round " + std::to_string(round_) + ": " + std::move(message);
}

template <typename Message>
bool ClockSynchronizer::receive(int source, int tag, Message& message, double deadline, Wait wait) {
  while (true) {
    MPI_Request request;
    const int status = MPI_Irecv(&message, sizeof(Message), MPI_BYTE, source, tag, tree_, &request);
    if (status != MPI_SUCCESS) {
      fail("receiving from rank " + std::to_string(source) + " failed: " + mpi_error_text(status));
      return false;
    }
    int done = wait == Wait::idle && wait_idle(request, deadline) ? 1 : 0;
    while (!done) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      // A timed wait polls, but gives the core away to anything else
      // runnable there: where ranks outnumber cores, the peer this rank
      // waits for may be the one it would spin against (round trips of the
      // scheduler's 4 ms slice). On a core of its own, yielding costs a
      // system call.
      if (!done) sched_yield();
      if (!done && MPI_Wtime() > deadline) {
        MPI_Cancel(&request);
        MPI_Status cancelled_status;
        MPI_Wait(&request, &cancelled_status);
        int cancelled = 0;
        MPI_Test_cancelled(&cancelled_status, &cancelled);
        if (cancelled) {
          fail("rank " + std::to_string(source) + " did not answer within " + std::to_string(options_.timeout_ms) +
               " ms");
          return false;
        }
        done = 1;  // it arrived while being cancelled
      }
    }
    if (message.round == round_) return true;
  }
}

// Parent side of one pair: ping-pongs until the best round trip is stable,
// then tells the child its offset to the reference (the parent's own plus the
// child's to the parent) and the child's clock reading it applies to.
void ClockSynchronizer::teach(int child, const std::optional<SyncPoint>& own) {
  OffsetEstimator estimator;
  const double deadline = MPI_Wtime() + options_.timeout_ms * 1e-3;
  bool measured = own.has_value();
  // One timed exchange; false when the child fell silent or MPI failed.
  const auto exchange = [&](bool counted) {
    Pong pong{};
    const int64_t sent = clock_.now_ns();
    if (send(Ping{round_, 1}, child, kTagPing, tree_) != MPI_SUCCESS ||
        !receive(child, kTagPong, pong, deadline, Wait::spin))
      return false;
    if (counted) estimator.add(sent, pong.child_ns, clock_.now_ns());
    return true;
  };
  int since_best = 0;
  int64_t best_rtt = INT64_MAX;
  for (int i = 0; measured && i < options_.warmup_exchanges + options_.max_exchanges; ++i) {
    measured = exchange(i >= options_.warmup_exchanges);
    if (!measured || i < options_.warmup_exchanges) continue;
    if (estimator.min_rtt_ns() < best_rtt) {
      best_rtt = estimator.min_rtt_ns();
      since_best = 0;
    } else if (++since_best >= options_.stable_exchanges) {
      break;
    }
  }
  // Still wide: on a node with fewer cores than processes, one of the pair
  // was not running for every exchange so far. Exchanges spread over the
  // scheduler's turns find one in which both ran. The reference's offset is
  // 0 at every moment, so its patience costs its later children nothing;
  // any other parent's costs them 1000 ppm of it (below).
  int rank = 0;
  MPI_Comm_rank(tree_, &rank);
  const bool reference = rank == 0;
  const double patience_start = MPI_Wtime();
  const auto narrowest = narrowest_bound_.find(child);
  const std::optional<int64_t> narrowest_earlier =
      narrowest == narrowest_bound_.end() ? std::nullopt : std::optional<int64_t>(narrowest->second);
  while (measured && estimator.count() > 0 &&
         earns_another_exchange(options_, estimator.estimate(kMaxRelativeDriftPpm).bound_ns,
                                (MPI_Wtime() - patience_start) * 1e3, reference, narrowest_earlier)) {
    const timespec pause{0, kPatiencePauseNs};
    nanosleep(&pause, nullptr);
    measured = exchange(true);
  }
  send(Ping{round_, 0}, child, kTagPing, tree_);
  Result result{round_, 0, 0, 0, 0};
  if (measured && estimator.count() > 0) {
    // The parent's own offset was measured a little earlier; allow for drift
    // since. The reference's offset is 0 at every moment: nothing drifts, and
    // its later children (taught after its farther ones, tens of ms later on
    // a busy machine) would be charged 1000 ppm of that for nothing.
    const double gap = reference ? 0 : std::fabs(static_cast<double>(estimator.parent_time_ns() - own->local_ns));
    const auto drift_allowance = static_cast<int64_t>(std::ceil(gap * kMaxRelativeDriftPpm * 1e-6));
    const OffsetEstimator::Estimate pair = estimator.estimate(kMaxRelativeDriftPpm);
    result = {round_, 1, estimator.child_time_ns(), pair.offset_ns + own->offset_ns,
              pair.bound_ns + own->bound_ns + drift_allowance};
    int64_t& narrowest_so_far = narrowest_bound_.try_emplace(child, pair.bound_ns).first->second;
    narrowest_so_far = std::min(narrowest_so_far, pair.bound_ns);
  }
  send(result, child, kTagResult, tree_);
}

std::optional<SyncPoint> ClockSynchronizer::learn(int parent, int levels_above) {
  // The parent first teaches the children farther away: allow for them.
  double deadline = MPI_Wtime() + options_.timeout_ms * 1e-3 * (levels_above + 1);
  // Idle until the parent turns to this rank; then every answer is timed.
  Wait wait = Wait::idle;
  while (true) {
    Ping ping{};
    if (!receive(parent, kTagPing, ping, deadline, wait)) return std::nullopt;
    wait = Wait::spin;
    if (!ping.go) break;
    if (send(Pong{round_, clock_.now_ns()}, parent, kTagPong, tree_) != MPI_SUCCESS) {
      fail("answering rank " + std::to_string(parent) + " failed");
      return std::nullopt;
    }
    deadline = MPI_Wtime() + options_.timeout_ms * 1e-3;
  }
  Result result{};
  if (!receive(parent, kTagResult, result, MPI_Wtime() + options_.timeout_ms * 1e-3, Wait::spin)) return std::nullopt;
  if (!result.measured) {
    fail("rank " + std::to_string(parent) + " had no measurement to pass on");
    return std::nullopt;
  }
  return SyncPoint{result.local_ns, result.offset_ns, result.bound_ns};
}

// Top-down binomial tree: at distance d (largest first), rank r with
// r % 2d == 0 teaches r + d, so every parent knows its offset before it teaches.
std::optional<SyncPoint> ClockSynchronizer::tree_round() {
  int rank = 0, size = 1;
  MPI_Comm_rank(tree_, &rank);
  MPI_Comm_size(tree_, &size);
  std::optional<SyncPoint> own = SyncPoint{clock_.now_ns(), 0, 0};
  int distance = 1, levels = 0;
  while (distance * 2 < size) {
    distance *= 2;
    ++levels;
  }
  for (; distance >= 1; distance /= 2, --levels) {
    if (rank % (2 * distance) == 0 && rank + distance < size) {
      teach(rank + distance, own);
    } else if (rank % (2 * distance) == distance) {
      own = learn(rank - distance, levels);
    }
  }
  return own;
}

std::optional<SyncPoint> ClockSynchronizer::round() {
  ++round_;
  error_.clear();
  std::optional<SyncPoint> point;
  if (tree_ != MPI_COMM_NULL) point = tree_round();
  if (shares_leader_clock_) {
    int64_t shared[4] = {point.has_value(), point ? point->local_ns : 0, point ? point->offset_ns : 0,
                         point ? point->bound_ns : 0};
    // The node's other ranks wait out the whole tree here, idle, and
    // seldom: each poll takes a core's time from the pairs measuring, and
    // a round is not shorter for their answering sooner.
    MPI_Request request;
    MPI_Ibcast(shared, 4, MPI_INT64_T, 0, node_, &request);
    wait_idle(request, std::numeric_limits<double>::infinity(), kNodeMatesLongestSleepNs);
    point = shared[0] ? std::optional<SyncPoint>(SyncPoint{shared[1], shared[2], shared[3]}) : std::nullopt;
    if (!point) fail("the node leader has no measurement");
  }
  return point;
}

}  // namespace rankscope::clocksync
