#include "synthetic_job.h"

#include <cstdio>
#include <algorithm>
#include <map>
#include <random>
#include <string_view>
#include <tuple>
#include <utility>

#include "rankscope/clocksync/clock.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"

namespace rankscope::testing {
namespace {

const std::vector<std::string> kNames = {"forward", "backward", "optimizer.step", "step", "MPI_Allreduce",
                                         "MPI_Wait", "layer.0", "layer.1", "layer.2", "layer.3"};

struct ThreadState {
  int64_t now;
  int64_t step_begin;
  uint64_t in_step = 0;
  std::vector<Event> buffer;
};

// How much later than the earliest possible `rank` enters shared collective
// `seq`: the same on every rank that asks, so each rank can be written alone.
int64_t entry_delay(uint64_t seed, uint64_t seq, int32_t rank) {
  uint64_t x = seed * 0x9e3779b97f4a7c15 + seq * 0xbf58476d1ce4e5b9 + static_cast<uint64_t>(rank) * 0x94d049bb133111eb;
  x ^= x >> 31;
  x *= 0xd6e8feb86cd1c5a9;
  x ^= x >> 29;
  return static_cast<int64_t>(x % static_cast<uint64_t>(kSyntheticEntrySpreadNs));
}

// The bits that name the job's ranks: at least one.
int rank_bits(int32_t world_size) {
  int bits = 1;
  while (bits < 31 && (int32_t{1} << bits) < world_size) ++bits;
  return bits;
}

clocksync::Clock skewed_clock(int32_t rank) {
  if (rank == 0) return clocksync::Clock(1000, 20);
  const int64_t offset = (rank % 2 ? 1 : -1) * std::min<int64_t>(int64_t{rank} * 1'300'000'000, 10'000'000'000);
  return clocksync::Clock(offset, static_cast<double>((rank * 37) % 401 - 200));
}

}  // namespace

SyntheticRank write_synthetic_rank(const std::string& path, int32_t rank, const SyntheticJob& job) {
  SyntheticRank out;
  out.path = path;
  out.names = kNames;
  std::mt19937_64 random(job.seed * 1000003 + static_cast<uint64_t>(rank));
  // Durations and gaps: the rank's own, or one timing for every rank when the
  // collectives or messages are shared.
  std::mt19937_64 shared_timing(job.seed);
  std::mt19937_64& timing = job.shared_collectives || job.messages ? shared_timing : random;
  std::uniform_int_distribution<int64_t> duration(200, 20000);
  std::uniform_int_distribution<uint32_t> name(0, static_cast<uint32_t>(kNames.size()) - 1);

  RankMetadata metadata;
  metadata.rank = rank;
  metadata.world_size = job.world_size;
  metadata.local_rank = rank % 4;
  metadata.local_size = 4;
  metadata.node_id = rank / 4;
  metadata.pid = 10000 + rank;
  metadata.host = "node-" + std::to_string(rank / 4);
  metadata.launcher = "synthetic";
  metadata.agent_version = "test";
  metadata.capture = "synthetic";
  metadata.gpu_uuids = "GPU-synthetic-" + std::to_string(rank);
  metadata.start_wall_ns = 1'700'000'000'000'000'000 + rank;
  metadata.start_local_ns = 1'000'000'000;
  metadata.job = job.job;

  ShardWriter writer;
  if (!writer.open(path, metadata, metadata.start_local_ns)) throw Error(writer.error());
  std::vector<std::pair<uint32_t, std::string_view>> strings;
  for (uint32_t i = 0; i < kNames.size(); ++i) strings.emplace_back(i, kNames[i]);
  const auto launch_name = static_cast<uint32_t>(kNames.size());
  const uint32_t first_kernel_name = launch_name + 1;
  std::vector<std::string> kernel_names;
  if (job.gpu_kernel_names > 0) {
    strings.emplace_back(launch_name, "cudaLaunchKernel");
    for (uint32_t k = 0; k < job.gpu_kernel_names; ++k) kernel_names.push_back("kernel-" + std::to_string(k));
    for (uint32_t k = 0; k < job.gpu_kernel_names; ++k) strings.emplace_back(first_kernel_name + k, kernel_names[k]);
  }
  std::vector<Track> tracks;
  for (int t = 0; t < job.threads; ++t) {
    tracks.push_back({static_cast<uint64_t>(5000 + t), static_cast<uint32_t>(t), 0, -1, TrackType::kThread, 0, 0});
  }
  const auto stream_track = static_cast<uint16_t>(job.threads);
  if (job.gpu_kernel_names > 0) tracks.push_back({7, stream_track, 0, 0, TrackType::kCudaStream, 0, 0});
  if (!writer.write_strings(strings, metadata.start_local_ns) || !writer.write_tracks(tracks, metadata.start_local_ns)) {
    throw Error(writer.error());
  }

  std::vector<ThreadState> threads(static_cast<size_t>(job.threads));
  ThreadState stream{};  // the GPU's kernels, when there is GPU work
  std::uniform_int_distribution<uint32_t> kernel_name(0, std::max<uint32_t>(job.gpu_kernel_names, 1) - 1);
  uint64_t correlation = 0;
  for (auto& thread : threads) {
    thread.now = metadata.start_local_ns + static_cast<int64_t>(timing() % 1000);
    thread.step_begin = thread.now;
    thread.buffer.reserve(job.chunk_events);
  }
  uint64_t seq = 0;
  uint64_t message_slot = 0;
  std::map<std::tuple<int32_t, int32_t, uint32_t>, uint64_t> messages_sent;  // (sender, receiver, tag) -> count
  const clocksync::Clock local = job.skewed ? skewed_clock(rank) : clocksync::Clock();
  const clocksync::Clock reference = job.skewed ? skewed_clock(0) : clocksync::Clock();
  // Events are made on the true time line, kept on rank 0's clock and written on the rank's own.
  auto flush = [&](ThreadState& thread) {
    for (Event& e : thread.buffer) {
      if (job.keep_truth) {
        Event truth = e;
        truth.begin_ns = reference.from_raw(e.begin_ns);
        truth.end_ns = reference.from_raw(e.end_ns);
        out.events.push_back(truth);
      }
      e.begin_ns = local.from_raw(e.begin_ns);
      e.end_ns = local.from_raw(e.end_ns);
    }
    if (!writer.write_events(thread.buffer)) throw Error(writer.error());
    thread.buffer.clear();
  };
  const int64_t measurement_error = rank == job.misclocked_rank ? job.misclock_ns : 0;
  auto sync_point = [&](int64_t t) {
    return SyncPoint{local.from_raw(t), local.from_raw(t) - reference.from_raw(t) + measurement_error,
                     kSyntheticSyncBoundNs};
  };
  if (job.skewed) {
    const SyncPoint at_start = sync_point(metadata.start_local_ns);
    if (!writer.write_sync_points({&at_start, 1}, metadata.start_local_ns)) throw Error(writer.error());
  }
  for (uint64_t i = 0; i < job.events_per_rank; ++i) {
    const auto t = static_cast<size_t>(i % threads.size());
    ThreadState& thread = threads[t];
    Event e{};
    e.track = static_cast<uint16_t>(t);
    e.peer = kNoPeer;
    // Every 64th event of a thread closes the step range that encloses the ones before it.
    if (++thread.in_step == 64) {
      e.kind = EventKind::kNvtxRange;
      e.name_id = 3;
      e.begin_ns = thread.step_begin;
      e.end_ns = thread.now;
      thread.step_begin = thread.now;
      thread.in_step = 0;
    } else {
      const int64_t d = duration(timing);
      e.begin_ns = thread.now;
      e.end_ns = thread.now + d;
      thread.now += d + static_cast<int64_t>(timing() % 500);
      e.name_id = name(random);
      switch (i % 5) {
        case 0:
          e.kind = EventKind::kMpiCollective;
          e.op = CommOp::kAllReduce;
          e.seq = seq++;
          e.bytes = 1u << 20;
          e.datatype = DataType::kFloat32;
          if (job.shared_collectives) {
            // Every rank is here at this true time; each enters after its own delay, and all
            // leave at least `d` after the latest possible entry.
            e.comm_hash = kSyntheticCommHash;
            e.begin_ns += entry_delay(job.seed, e.seq, rank);
            e.end_ns += kSyntheticEntrySpreadNs;
            thread.now += kSyntheticEntrySpreadNs;
          } else {
            // No communicator: the ranks' timings are independent, not those of a real collective.
            e.comm_hash = 0;
          }
          break;
        case 1: {
          e.kind = EventKind::kMpiCall;
          if (!job.messages) break;
          const int bits = rank_bits(job.world_size);
          const auto bit = static_cast<uint32_t>(message_slot % static_cast<uint64_t>(bits));
          const bool lower_sends = (message_slot / static_cast<uint64_t>(bits)) % 2 == 0;
          ++message_slot;
          const int32_t partner = rank ^ (int32_t{1} << bit);
          if (partner >= job.world_size) break;
          const bool sending = (rank < partner) == lower_sends;
          e.kind = EventKind::kMpiP2p;
          e.op = sending ? CommOp::kSend : CommOp::kRecv;
          e.comm_hash = kSyntheticCommHash;
          e.peer = partner;
          e.correlation_id = bit;
          e.seq = messages_sent[{sending ? rank : partner, sending ? partner : rank, bit}]++;
          e.bytes = 4096;
          e.datatype = DataType::kUint8;
          break;
        }
        case 2: {
          e.kind = EventKind::kCudaApi;
          if (job.gpu_kernel_names == 0) break;
          e.name_id = launch_name;
          e.correlation_id = ++correlation;
          Event kernel = e;
          kernel.kind = EventKind::kGpuKernel;
          kernel.track = stream_track;
          kernel.name_id = first_kernel_name + kernel_name(random);
          kernel.begin_ns = std::max(stream.now, e.end_ns) + 1000 + static_cast<int64_t>(timing() % 4000);
          kernel.end_ns = kernel.begin_ns + duration(timing);
          stream.now = kernel.end_ns;
          stream.buffer.push_back(kernel);
          if (stream.buffer.size() == job.chunk_events) flush(stream);
          break;
        }
        default: e.kind = EventKind::kNvtxRange; break;
      }
    }
    thread.buffer.push_back(e);
    if (thread.buffer.size() == job.chunk_events) flush(thread);
  }
  for (auto& thread : threads) {
    if (!thread.buffer.empty()) flush(thread);
  }
  if (!stream.buffer.empty()) flush(stream);
  if (job.skewed) {
    int64_t end = 0;
    for (const auto& thread : threads) end = std::max(end, thread.now);
    const SyncPoint at_end = sync_point(end);
    if (!writer.write_sync_points({&at_end, 1}, end)) throw Error(writer.error());
  }
  Counters counters;
  counters.set(counter::kEventsDropped, out.dropped);
  if (job.close_cleanly) {
    if (!writer.close(counters, threads[0].now)) throw Error(writer.error());
  } else if (!writer.write_counters(counters, threads[0].now)) {
    throw Error(writer.error());
  }
  return out;
}

std::vector<SyntheticRank> write_synthetic_job(const std::string& dir, const SyntheticJob& job) {
  std::vector<SyntheticRank> ranks;
  for (int32_t r = 0; r < job.world_size; ++r) {
    char name[32];
    std::snprintf(name, sizeof(name), "/rank-%05d.shard", r);
    ranks.push_back(write_synthetic_rank(dir + name, r, job));
  }
  return ranks;
}

}  // namespace rankscope::testing
