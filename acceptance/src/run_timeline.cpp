#include "rankscope/acceptance/run_timeline.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "rankscope/acceptance/measure.h"
#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/model/error.h"
#include "rankscope/model/hash.h"
#include "rankscope/model/shard.h"
#include "rankscope/model/statistics.h"
#include "rankscope/model/temporary_paths.h"
#include "rankscope/model/version.h"
#include "rankscope/mpi_exchange/gather.h"

namespace rankscope::acceptance {
namespace {

// The run's tracks: its thread, and its communicator, where nonblocking
// operations are in flight (the MPI shim's layout).
constexpr uint16_t kThreadTrack = 0, kCommTrack = 1;
// One communicator, the same on every rank.
const uint64_t kCommHash = hash_bytes("rankscope accept: MPI_COMM_WORLD");

int64_t wall_now_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// A folder of this process's own, removed when done.
std::unique_ptr<TemporaryPath> temporary_folder() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/rankscope-accept-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw Error("cannot make a folder like " + pattern + ": " + errno_text(errno));
  return std::make_unique<TemporaryPath>(pattern);
}

std::string file_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (!file.good() && !file.eof()) throw Error("cannot read " + path);
  return bytes;
}

// Every process's bytes on `root`, in process order (empty elsewhere).
std::vector<std::string> gather_bytes(MPI_Comm comm, const std::string& local, int root) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int length = static_cast<int>(local.size());
  std::vector<int> lengths(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, comm);
  std::string all;
  if (rank == root) {
    int64_t total = 0;
    for (int r = 0; r < size; ++r) {
      offsets[static_cast<size_t>(r)] = static_cast<int>(total);
      total += lengths[static_cast<size_t>(r)];
    }
    if (total > INT32_MAX) throw Error("the shards of the acceptance run exceed 2 GiB together");
    all.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(local.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, root, comm);
  std::vector<std::string> out;
  if (rank == root)
    for (int r = 0; r < size; ++r)
      out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                               static_cast<size_t>(lengths[static_cast<size_t>(r)])));
  return out;
}

}  // namespace

RunTimeline::RunTimeline(MPI_Comm comm, const std::string& path) : comm_(comm), path_(path) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  if (path_.empty() && rank_ == 0) {
    scratch_ = temporary_folder();
    path_ = scratch_->path() + "/accept.h5";
  }
  clock_ = clocksync::Clock::for_rank(rank_);
  synchronizer_ = std::make_unique<clocksync::ClockSynchronizer>(comm, clock_);
  job_start_wall_ns_ = clocksync::job_start_wall_ns(comm);
  start_wall_ns_ = wall_now_ns();
  start_local_ns_ = now();
  sync_clock();
}

RunTimeline::~RunTimeline() = default;

void RunTimeline::sync_clock() {
  if (const auto point = synchronizer_->round()) sync_points_.push_back(*point);
  else if (sync_error_.empty()) sync_error_ = synchronizer_->error();
  // Every rank leaves the round once all have measured, and none spins
  // meanwhile beside pairs still measuring.
  clocksync::idle_barrier(comm_);
}

uint32_t RunTimeline::name_id(std::string_view name) {
  const auto found = names_.find(name);
  if (found != names_.end()) return found->second;
  const auto id = static_cast<uint32_t>(names_.size());
  names_.emplace(std::string(name), id);
  return id;
}

Event RunTimeline::event(EventKind kind, std::string_view name, int64_t begin, int64_t end) {
  Event e{};
  e.begin_ns = begin;
  e.end_ns = end;
  e.kind = kind;
  e.name_id = name_id(name);
  e.track = kThreadTrack;
  e.peer = kNoPeer;
  return e;
}

void RunTimeline::range(std::string_view name, int64_t begin, int64_t end) {
  events_.push_back(event(EventKind::kNvtxRange, name, begin, end));
}

void RunTimeline::call(std::string_view name, int64_t begin, int64_t end) {
  events_.push_back(event(EventKind::kMpiCall, name, begin, end));
}

void RunTimeline::message(CommOp op, int peer, int tag, uint64_t bytes, int64_t begin, int64_t end) {
  const bool sending = op == CommOp::kSend;
  Event e = event(EventKind::kMpiP2p, sending ? "MPI_Send" : "MPI_Recv", begin, end);
  e.op = op;
  e.comm_hash = kCommHash;
  e.peer = peer;
  e.correlation_id = static_cast<uint32_t>(tag);
  e.bytes = bytes;
  e.datatype = DataType::kInt8;  // MPI_CHAR
  e.seq = messages_[{sending ? rank_ : peer, sending ? peer : rank_, tag}]++;
  events_.push_back(e);
}

void RunTimeline::collective(std::string_view call, CommOp op, uint64_t bytes, DataType type, int64_t begin,
                             int64_t end, bool nonblocking) {
  Event e = event(EventKind::kMpiCollective, call, begin, end);
  e.op = op;
  e.comm_hash = kCommHash;
  e.seq = collectives_[op]++;
  e.bytes = bytes;
  e.datatype = type;
  if (nonblocking) e.track = kCommTrack;
  events_.push_back(e);
}

MergeResult RunTimeline::write(Measurements& measurements) {
  sync_clock();
  // Each node's clock: offset at the first round, the median bound, the first failure.
  std::vector<int64_t> bounds;
  for (const SyncPoint& point : sync_points_) bounds.push_back(point.bound_ns);
  const int64_t offset = sync_points_.empty() ? 0 : sync_points_.front().offset_ns;
  const std::vector<int64_t> clocks = allgather_rows(comm_, std::vector<int64_t>{offset, median_ns(bounds)});
  const std::vector<std::string> errors = allgather_strings(comm_, {sync_error_});
  if (rank_ == 0)
    for (size_t n = 0; n < measurements.nodes.size(); ++n)
      measurements.nodes[n].clock = {clocks[2 * n], clocks[2 * n + 1], errors[n]};

  const std::unique_ptr<TemporaryPath> folder = temporary_folder();
  const std::string shard = folder->path() + "/" + shard_file_name(rank_);
  std::string error;
  {
    RankMetadata metadata;
    metadata.rank = rank_;
    metadata.world_size = size_;
    metadata.local_rank = 0;
    metadata.local_size = 1;
    metadata.node_id = rank_;
    metadata.pid = ::getpid();
    metadata.host = take_inventory().host;
    metadata.launcher = "rankscope accept";
    metadata.agent_version = kRankscopeVersion;
    metadata.capture = "accept";
    metadata.start_wall_ns = start_wall_ns_;
    metadata.start_local_ns = start_local_ns_;
    metadata.job = {"rankscope-accept", job_start_wall_ns_};
    const uint32_t thread_name = name_id("accept"), comm_name = name_id("MPI_COMM_WORLD");
    std::vector<std::pair<uint32_t, std::string_view>> strings;
    for (const auto& [name, id] : names_) strings.emplace_back(id, name);
    const Track tracks[] = {
        {static_cast<uint64_t>(::gettid()), kThreadTrack, thread_name, -1, TrackType::kThread, 0, 0},
        {kCommHash, kCommTrack, comm_name, -1, TrackType::kMpiComm, 0, 0}};
    const int64_t written = now();
    ShardWriter writer;
    if (!writer.open(shard, metadata, start_local_ns_) || !writer.write_strings(strings, written) ||
        !writer.write_tracks(tracks, written) || !writer.write_events(events_) ||
        !writer.write_sync_points(sync_points_, written) || !writer.close({}, written)) {
      error = "rank " + std::to_string(rank_) + ": " + writer.error();
    }
  }
  check_all(comm_, error);
  const std::vector<std::string> shards = gather_bytes(comm_, file_bytes(shard), 0);
  MergeResult result;
  if (rank_ == 0) {
    try {
      for (int r = 1; r < size_; ++r) {
        const std::string other = folder->path() + "/" + shard_file_name(r);
        std::ofstream file(other, std::ios::binary);
        file.write(shards[static_cast<size_t>(r)].data(), static_cast<std::streamsize>(shards[static_cast<size_t>(r)].size()));
        if (!file.good()) throw Error("cannot write " + other);
      }
      MergeOptions merge;
      merge.inputs = {folder->path()};
      merge.output = path_;
      result = merge_shards(MPI_COMM_SELF, merge);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  check_all(comm_, error);
  return result;
}

}  // namespace rankscope::acceptance
