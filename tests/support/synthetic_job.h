// Writes shards that look like a training job's: several threads per rank,
// nested ranges recorded when they end, collectives with sequence numbers.
// Used by the tests (with the truth kept) and by the merge benchmark.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/model/event.h"
#include "rankscope/model/metadata.h"

namespace rankscope::testing {

struct SyntheticJob {
  int32_t world_size = 4;
  uint64_t events_per_rank = 10000;
  int threads = 3;
  uint32_t chunk_events = 4096;
  uint64_t seed = 1;
  bool close_cleanly = true;   // false: the shard ends without its end record
  bool keep_truth = true;      // return every event written, per rank
  // Each rank writes on a skewed clock (offsets up to ±10 s, drifts up to
  // ±200 ppm, rank 0 skewed too) and records two exact-to-25-ns measurements
  // of it; the truth is then on rank 0's clock, where the merge must put it.
  bool skewed = false;
  // The collectives are real: every rank takes part in each allreduce of one
  // communicator (kSyntheticCommHash). The ranks' threads then share one
  // timing; each rank enters a collective up to kSyntheticEntrySpreadNs
  // later than the others, and all leave together after the last has
  // entered, so causality holds in true time.
  bool shared_collectives = false;
  // With skewed: the clock measurements of this rank are wrong by
  // `misclock_ns` (they claim its clock is that much further ahead of rank
  // 0's than it is), so the merge puts its events that much too early, far
  // beyond the 25 ns bound the measurements state. Negative: too late.
  int32_t misclocked_rank = -1;
  int64_t misclock_ns = 0;
  // Point-to-point messages take the place of some MPI calls. In each such
  // slot the ranks pair up, rank r with r XOR 2^b (b cycling over the bits of
  // the largest rank), and one of each pair sends to the other (the lower
  // rank for one cycle over the bits, the higher for the next); a rank whose
  // partner is beyond the job makes its MPI call instead. A send and its
  // receive share one true timing, so the receive ends after the send began,
  // by at least 200 ns. The ranks' threads share one timing, as with
  // shared_collectives. Messages go on communicator kSyntheticCommHash with
  // tag b, numbered per (sender, receiver, tag) as the agent numbers them.
  bool messages = false;
  // GPU work: each CUDA call is a kernel launch (cudaLaunchKernel, with a
  // correlation id), its kernel on one CUDA stream 1-5 µs after the call
  // ends or after the stream's previous kernel, named by one of this many
  // kernel names (kernel-0, kernel-1, ...); 0: no GPU work, the calls alone.
  uint32_t gpu_kernel_names = 0;
  // Every rank's shard says it is of this job.
  JobIdentity job{"synthetic:1", 1'700'000'000'000'000'000};
};

inline constexpr int64_t kSyntheticSyncBoundNs = 25;
inline constexpr uint64_t kSyntheticCommHash = 0x5eed'c0;
inline constexpr int64_t kSyntheticEntrySpreadNs = 3000;

struct SyntheticRank {
  std::string path;
  std::vector<Event> events;         // local name ids; times on rank 0's clock; when keep_truth
  std::vector<std::string> names;    // index = local name id
  uint64_t dropped = 0;
};

// Writes DIR/rank-NNNNN.shard for every rank of the job.
std::vector<SyntheticRank> write_synthetic_job(const std::string& dir, const SyntheticJob& job);

// Writes one rank's shard.
SyntheticRank write_synthetic_rank(const std::string& path, int32_t rank, const SyntheticJob& job);

}  // namespace rankscope::testing
