#include <algorithm>
#include <cmath>

#include "rankscope/clocksync_mpi.h"

namespace rankscope::clocksync {
namespace {

constexpr int kTagPing = 31001;
constexpr int kTagPong = 31002;
constexpr int kTagResult = 31003;

// Parent side of one pair: ping-pongs until the best round trip is stable,
// then tells the child its offset to the reference (the parent's own plus the
// child's to the parent) and the child's clock reading it applies to.
void teach(MPI_Comm comm, int child, const Clock& clock, const SyncPoint& own, const SyncOptions& options) {
  OffsetEstimator estimator;
  int since_best = 0;
  int64_t best_rtt = INT64_MAX;
  for (int i = 0; i < options.warmup_exchanges + options.max_exchanges; ++i) {
    const int64_t go = 1;
    int64_t child_time = 0;
    const int64_t send = clock.now_ns();
    MPI_Send(&go, 1, MPI_INT64_T, child, kTagPing, comm);
    MPI_Recv(&child_time, 1, MPI_INT64_T, child, kTagPong, comm, MPI_STATUS_IGNORE);
    const int64_t receive = clock.now_ns();
    if (i < options.warmup_exchanges) continue;
    estimator.add(send, child_time, receive);
    if (estimator.min_rtt_ns() < best_rtt) {
      best_rtt = estimator.min_rtt_ns();
      since_best = 0;
    } else if (++since_best >= options.stable_exchanges) {
      break;
    }
  }
  const int64_t stop = 0;
  MPI_Send(&stop, 1, MPI_INT64_T, child, kTagPing, comm);
  // The parent's own offset was measured a little earlier; allow for drift since.
  const double gap = std::fabs(static_cast<double>(estimator.parent_time_ns() - own.local_ns));
  const int64_t drift_allowance = static_cast<int64_t>(std::ceil(gap * kMaxRelativeDriftPpm * 1e-6));
  const int64_t result[3] = {estimator.child_time_ns(), estimator.offset_ns() + own.offset_ns,
                             estimator.bound_ns() + own.bound_ns + drift_allowance};
  MPI_Send(result, 3, MPI_INT64_T, child, kTagResult, comm);
}

SyncPoint learn(MPI_Comm comm, int parent, const Clock& clock) {
  while (true) {
    int64_t go = 0;
    MPI_Recv(&go, 1, MPI_INT64_T, parent, kTagPing, comm, MPI_STATUS_IGNORE);
    if (!go) break;
    const int64_t now = clock.now_ns();
    MPI_Send(&now, 1, MPI_INT64_T, parent, kTagPong, comm);
  }
  int64_t result[3];
  MPI_Recv(result, 3, MPI_INT64_T, parent, kTagResult, comm, MPI_STATUS_IGNORE);
  return {result[0], result[1], result[2]};
}

// Top-down binomial tree over `comm`: at distance d (largest first), rank r
// with r % 2d == 0 teaches r + d, so every parent knows its offset before it teaches.
SyncPoint tree_round(MPI_Comm comm, const Clock& clock, const SyncOptions& options) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  SyncPoint own{clock.now_ns(), 0, 0};
  int distance = 1;
  while (distance * 2 < size) distance *= 2;
  for (; distance >= 1; distance /= 2) {
    if (rank % (2 * distance) == 0 && rank + distance < size) {
      teach(comm, rank + distance, clock, own, options);
    } else if (rank % (2 * distance) == distance) {
      own = learn(comm, rank - distance, clock);
    }
  }
  return own;
}

}  // namespace

ClockSynchronizer::ClockSynchronizer(MPI_Comm comm, const Clock& clock, const SyncOptions& options)
    : clock_(clock), options_(options) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_);
  int node_rank = 0;
  MPI_Comm_rank(node_, &node_rank);
  // A virtual clock anywhere breaks the shared physical clock: then every rank takes part.
  int is_virtual = clock.is_virtual() ? 1 : 0, any_virtual = 0;
  MPI_Allreduce(&is_virtual, &any_virtual, 1, MPI_INT, MPI_MAX, comm);
  shares_leader_clock_ = !any_virtual;
  MPI_Comm_split(comm, any_virtual || node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &tree_);
}

ClockSynchronizer::~ClockSynchronizer() {
  if (tree_ != MPI_COMM_NULL) MPI_Comm_free(&tree_);
  MPI_Comm_free(&node_);
}

SyncPoint ClockSynchronizer::round() {
  SyncPoint point{};
  if (tree_ != MPI_COMM_NULL) point = tree_round(tree_, clock_, options_);
  if (shares_leader_clock_) {
    int64_t shared[3] = {point.local_ns, point.offset_ns, point.bound_ns};
    MPI_Bcast(shared, 3, MPI_INT64_T, 0, node_);
    point = {shared[0], shared[1], shared[2]};
  }
  return point;
}

}  // namespace rankscope::clocksync
