// A small hand-made job for the exporter's tests: every kind of track,
// nonblocking MPI collectives in flight together, CUDA launches and their
// GPU work, a NCCL collective (host enqueue, kernel, GPU execution), NVTX
// start/end ranges that overlap, an unfinished call that overlaps its
// thread's ranges, instants, counter samples and four ProfilerStep ranges.
// Every rank takes part in every collective, and the ranks arrive in a
// different order in each step. The expected counts of a full export are
// below; docs/export.md explains how they come about.
#pragma once

#include <cstdint>
#include <string>

namespace rankscope::testing {

inline constexpr int32_t kFixtureRanks = 3;
inline constexpr int kFixtureSteps = 4;
inline constexpr int64_t kFixtureStart = 1'000'000;   // ns; step k begins at start + k * step length
inline constexpr int64_t kFixtureStepNs = 100'000;

// Per rank and step.
inline constexpr uint64_t kFixtureSlicesPerStep = 17;
inline constexpr uint64_t kFixtureInstantsPerStep = 2;
inline constexpr uint64_t kFixtureCounterEventsPerStep = 1;
inline constexpr uint64_t kFixtureMpiCollectivesPerStep = 3;   // matched across ranks
inline constexpr uint64_t kFixtureNcclCollectivesPerStep = 1;
inline constexpr uint64_t kFixtureLaunchesPerStep = 3;          // host call -> GPU work, per rank
// Per rank: lanes besides the main thread's first (its overflow lane, two
// on the stream, one NCCL, three MPI, two NVTX domain), and counter tracks
// (the source's "GPU memory", bytes in flight, GPU busy).
inline constexpr uint64_t kFixtureOtherTracks = 9;
inline constexpr uint64_t kFixtureCounterTracks = 3;

// Writes DIR/rank-NNNNN.shard for each rank.
void write_export_fixture(const std::string& dir);

}  // namespace rankscope::testing
