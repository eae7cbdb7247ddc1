// A rank's events of one step, read without reading the rest of the rank:
// what the critical path's walk and the step's replay read.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "device_work_collector.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::analysis {

// The rank's events that begin in [from, until): the first block found by a
// binary search on the blocks' first events, then block after block.
std::vector<Event> events_beginning_in(const Timeline& timeline, const RankInfo& info, int64_t from, int64_t until);

// The track of the rank's training thread: its steps', else its first thread's; -1: none.
int32_t training_thread(const RankInfo& info, const RankProfile& rank);

// A call or operation in which collectives or messages may complete: MPI
// calls, collectives and blocking point-to-point calls, c10d's collectives
// and waits, NCCL's kernels.
bool is_communication(EventKind kind);

// An MPI call of any kind: where Open MPI moves messages along.
bool is_mpi(EventKind kind);

// A GPU operation the critical path follows on its stream: a kernel, a
// copy, a memset, NCCL's kernels (collective and point-to-point).
bool is_gpu_operation(EventKind kind);

// A CUDA call's kind by its name (NameTraits::Api); kNone for any other event.
NameTraits::Api cuda_api(const Event& e, const std::vector<NameTraits>& names);


// When a message's other end released a wait for it: the last of that
// rank's MPI calls (`mpi_calls`, their begins in order, on any of its
// threads) that began while the wait went on, after `waiting` (and after
// the other end's post at `posted`) and before `until` (the earlier of the
// two ends' completions); its post where none did.
// A message too large to go eagerly moves only while its sender is inside
// MPI: a stage that posts its gradient's send and goes on computing holds
// its receiver until its next MPI call, and that wait shrinks as the
// stage's compute does. A wait that began after the other end's last call
// keeps the post: when its message moved is not known. Any thread's call
// moves it: task runtimes make every MPI call on a communication thread.
int64_t message_released(const std::vector<int64_t>& mpi_calls, int64_t posted, int64_t waiting, int64_t until);

// The begins of the MPI calls among `events`, in order: what
// message_released() takes.
std::vector<int64_t> mpi_call_begins(const std::vector<Event>& events);

// A point-to-point message: (communicator, sequence number, sender,
// receiver, tag), equal on its send and its receive as the MPI shim numbers
// them. None for an event that is no send or receive to another rank.
using MessageKey = std::tuple<uint64_t, uint64_t, int32_t, int32_t, uint64_t>;
std::optional<MessageKey> message_key(const Event& e, int32_t rank);

// Per rank, the step's collectives of more than one rank by when they
// completed there: (end, index into JobProfile::collectives), in time order.
using StepCompletions = std::vector<std::vector<std::pair<int64_t, size_t>>>;
StepCompletions step_completions(const JobProfile& job, size_t step);

// Of what completed on a rank in [from, until] ((end, index) in time
// order), the one whose last arrival came latest: what held a call there.
// None without any.
template <typename ArrivalOf>
std::optional<size_t> latest_arrival(const std::vector<std::pair<int64_t, size_t>>& completed, int64_t from,
                                     int64_t until, ArrivalOf arrival_of) {
  auto it = std::lower_bound(completed.begin(), completed.end(), from,
                             [](const auto& c, int64_t time) { return c.first < time; });
  std::optional<size_t> held;
  int64_t latest = INT64_MIN;
  for (; it != completed.end() && it->first <= until; ++it) {
    const int64_t arrival = arrival_of(it->second);
    if (!held || arrival > latest) {
      held = it->second;
      latest = arrival;
    }
  }
  return held;
}

// Of the collectives that completed on a rank in [from, until], the one
// whose last rank arrived latest.
std::optional<size_t> collective_held(const JobProfile& job, const std::vector<std::pair<int64_t, size_t>>& completed,
                                      int64_t from, int64_t until);

}  // namespace rankscope::analysis
