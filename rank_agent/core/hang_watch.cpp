// Hangs (--hang-timeout): each time the flusher wakes, a call this rank has
// been inside for too long writes the state of every rank's open calls, and
// --hang-action abort ends the rank.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "agent_parts.h"
#include "rankscope/model/text.h"

namespace rankscope::agent {

// The calls the application's threads are inside of now and, with
// `with_sources`, what the capture sources hold open (NVTX ranges), as
// incomplete events ending now; each once, however often this is called.
bool Agent::write_open_state(int64_t now, bool with_sources) {
  std::vector<Event> found, open;
  recorder_.for_each_call_in_progress([&](const Event& event) { found.push_back(event); });
  if (with_sources) {
    for (const CaptureSource* source : started_sources_) source->add_open_events(now, found);
  }
  for (Event& event : found) {
    const std::tuple key{uint32_t{event.track}, event.begin_ns, event.op, event.seq, event.peer};
    if (std::find(calls_written_.begin(), calls_written_.end(), key) != calls_written_.end()) continue;
    calls_written_.push_back(key);
    event.end_ns = std::max(now, event.begin_ns);
    event.flags |= kFlagIncomplete;
    open.push_back(event);
  }
  return open.empty() || write_failed_ || writer_.write_events(open);
}

// Whether another rank of this job left the hang file (one left by an
// earlier run in the same folder is older than this rank).
bool Agent::hang_told() const {
  struct stat told {};
  return ::stat(hang_file_.c_str(), &told) == 0 &&
         int64_t{told.st_mtim.tv_sec} * 1'000'000'000 + told.st_mtim.tv_nsec >= metadata_.start_wall_ns;
}

// Each time the flusher wakes: a call of this rank's past the timeout, or
// the file another rank left, makes this rank write out what it holds and
// the calls it is inside of, once; with --hang-action abort, the rank ends
// itself once the others have had the time to do the same.
void Agent::watch_for_hang() {
  if (hang_timeout_ns_ == 0) return;
  const int64_t now = clock_.now_ns();
  if (!hang_dumped_) {
    Event oldest{};
    // Collectives, and NCCL's sends and receives: a thread in MPI_Recv may
    // wait for work as long as it likes, but a NCCL kernel that waits holds
    // back all the work queued on its stream after it. MPI's are calls the
    // application's threads are inside of (or waits for them; a thread that
    // polls one may be at work between its polls); NCCL's run on the GPU,
    // after the call that enqueued them returned.
    const auto consider = [&](const Event& event) {
      const bool watched = is_collective_kind(event.kind) || event.kind == EventKind::kNcclP2pGpu;
      if (watched && !(event.flags & kFlagPolling) && now - event.begin_ns >= hang_timeout_ns_ &&
          (oldest.begin_ns == 0 || event.begin_ns < oldest.begin_ns)) {
        oldest = event;
      }
    };
    recorder_.for_each_call_in_progress(consider);
    gpu_tasks_.clear();
    for (const CaptureSource* source : started_sources_) {
      if (source->bit() == kCaptureNccl) source->add_open_events(now, gpu_tasks_);
    }
    for (const Event& event : gpu_tasks_) consider(event);
    // Once a second at most: on a shared file system every rank's look is a
    // request to its metadata server.
    if (oldest.begin_ns == 0) {
      if (now - hang_file_checked_ns_ < 1'000'000'000) return;
      hang_file_checked_ns_ = now;
      if (!hang_told()) return;
    }
    // Time for the others to look for the hang file (once a second) and write theirs.
    const int64_t grace_ns = 3'000'000'000 + int64_t{flush_ms_} * 5'000'000;
    if (oldest.begin_ns != 0) {
      const auto create = [&] { return ::open(hang_file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644); };
      int fd = create();
      if (fd < 0 && errno == EEXIST && !hang_told()) {
        ::unlink(hang_file_.c_str());
        fd = create();
      }
      if (fd >= 0) {
        // A send or receive names its peer by its rank in the communicator, as NCCL does.
        const std::string peer =
            oldest.kind != EventKind::kNcclP2pGpu ? std::string()
            : oldest.op == CommOp::kSend          ? printf_string(" to rank %d", oldest.peer)
                                                  : printf_string(" from rank %d", oldest.peer);
        const std::string line =
            printf_string("inside %s #%llu%s of communicator %016llx for %.1f s (--hang-timeout): every rank writes "
                          "out its state",
                          std::string(comm_op_name(oldest.op)).c_str(), static_cast<unsigned long long>(oldest.seq),
                          peer.c_str(), static_cast<unsigned long long>(oldest.comm_hash),
                          static_cast<double>(now - oldest.begin_ns) * 1e-9) +
            (hang_abort_ ? printf_string("; the job ends in %.1f s (--hang-action abort)", static_cast<double>(grace_ns) * 1e-9)
                         : std::string());
        [[maybe_unused]] const ssize_t written = ::write(fd, line.data(), line.size());
        ::close(fd);
        report(line);
      }
    }
    hang_dumped_ = true;
    flush_once(Flush::kDump, now);
    if (!write_open_state(now, true) || !writer_.write_counters(counters(), now)) ++shard_write_errors_;
    if (hang_abort_) end_rank_at_ns_ = now + grace_ns;
    return;
  }
  if (end_rank_at_ns_ == 0 || now < end_rank_at_ns_) return;
  if (!end_signalled_) {
    // As mpirun ends a rank: the termination handler closes the shard, and
    // mpirun then ends the ranks that are left.
    end_signalled_ = true;
    end_rank_at_ns_ = now + 5'000'000'000;
    ::kill(::getpid(), SIGTERM);
    return;
  }
  // The application handles SIGTERM its own way and did not end. Where
  // another thread is closing the shard, its close ends the flusher.
  if (!finish() && !closed()) return;
  ::kill(::getpid(), SIGKILL);
}


}  // namespace rankscope::agent
