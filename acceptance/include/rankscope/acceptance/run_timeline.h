// The acceptance run as a rankscope timeline. Every rank records what it
// measures as events on its own event clock, as the capture library and the
// MPI shim would (NVTX ranges, MPI messages and collectives), with clock sync
// rounds at the start, between stages and at the end; at the end rank 0 gathers every rank's
// shard over MPI (nodes need share no folder) and merges them, so that the
// merge aligns the clocks and checks causality as for any job. What the
// timeline holds: docs/accept.md, "The timeline of the run".
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "rankscope/acceptance/measurements.h"
#include "rankscope/clocksync/clock.h"
#include "rankscope/merge/merge.h"
#include "rankscope/model/event.h"
#include "rankscope/model/temporary_paths.h"

namespace rankscope::clocksync {
class ClockSynchronizer;
}

namespace rankscope::acceptance {

class RunTimeline {
 public:
  // Collective over `comm` (one rank per node), which must outlive this
  // object: the first clock sync round. The timeline is to be written to
  // `path`, or where it is empty, to a temporary file that this object
  // removes.
  RunTimeline(MPI_Comm comm, const std::string& path);
  RunTimeline(const RunTimeline&) = delete;
  RunTimeline& operator=(const RunTimeline&) = delete;
  ~RunTimeline();

  int64_t now() const { return clock_.now_ns(); }

  // An NVTX range on this rank's thread from its construction to its end.
  class Range {
   public:
    Range(RunTimeline& timeline, std::string_view name) : timeline_(timeline), name_(name), begin_(timeline.now()) {}
    Range(const Range&) = delete;
    Range& operator=(const Range&) = delete;
    ~Range() { timeline_.range(name_, begin_, timeline_.now()); }

   private:
    RunTimeline& timeline_;
    std::string name_;
    int64_t begin_;
  };

  void range(std::string_view name, int64_t begin, int64_t end);
  // An MPI call that moves no data of its own (MPI_Waitall), on the thread.
  void call(std::string_view name, int64_t begin, int64_t end);
  // A blocking MPI_Send (op kSend) or MPI_Recv (kRecv) of `bytes` with `peer`
  // (a rank of the run's communicator) under `tag`, numbered per sender,
  // receiver and tag as the MPI shim numbers them, so that the merge pairs
  // each send with its receive.
  void message(CommOp op, int peer, int tag, uint64_t bytes, int64_t begin, int64_t end);
  // A collective over the whole communicator, numbered per operation. A
  // nonblocking one (`call` MPI_Iallreduce, say) is in flight from its post
  // to its completion, on the communicator's track as the shim records it.
  void collective(std::string_view call, CommOp op, uint64_t bytes, DataType type, int64_t begin, int64_t end,
                  bool nonblocking);

  // Collective: a clock sync round. The node's bound is the median of its
  // rounds', so that one round on a busy node fails nothing.
  void sync_clock();

  // Collective: the last clock sync round, then every rank's shard to rank 0,
  // which merges them into path() (OUTPUT.partial until complete). On rank 0,
  // each node's clock goes into `measurements`. Throws the same Error on
  // every rank when the timeline cannot be written.
  MergeResult write(Measurements& measurements);
  // Where rank 0 writes the timeline.
  const std::string& path() const { return path_; }

 private:
  uint32_t name_id(std::string_view name);
  Event event(EventKind kind, std::string_view name, int64_t begin, int64_t end);

  MPI_Comm comm_;
  std::unique_ptr<TemporaryPath> scratch_;  // holds the timeline when no path was given
  std::string path_;
  int rank_ = 0, size_ = 1;
  clocksync::Clock clock_;
  std::unique_ptr<clocksync::ClockSynchronizer> synchronizer_;
  std::vector<SyncPoint> sync_points_;
  std::string sync_error_;  // the first round's failure, if any
  int64_t job_start_wall_ns_ = 0;
  int64_t start_local_ns_ = 0, start_wall_ns_ = 0;
  std::vector<Event> events_;
  std::map<std::string, uint32_t, std::less<>> names_;
  std::map<std::tuple<int, int, int>, uint64_t> messages_;  // (sender, receiver, tag) → messages so far
  std::map<CommOp, uint64_t> collectives_;                   // operation → instances so far
};

}  // namespace rankscope::acceptance
