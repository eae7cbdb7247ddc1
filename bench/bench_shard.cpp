// Shard codec costs: writing event chunks (what the agent's flusher pays),
// scanning them back with checksums (what the merge pays), and CRC-32C alone.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "rankscope/model/crc32c.h"
#include "rankscope/model/shard.h"

namespace {

std::vector<rankscope::Event> make_events(size_t n) {
  std::vector<rankscope::Event> events(n);
  for (size_t i = 0; i < n; ++i) {
    events[i] = rankscope::Event{};
    events[i].begin_ns = static_cast<int64_t>(i * 1000);
    events[i].end_ns = events[i].begin_ns + 500;
    events[i].kind = rankscope::EventKind::kNvtxRange;
  }
  return events;
}

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string(name) + std::to_string(::getpid()))).string();
}

void BM_Crc32c(benchmark::State& state) {
  std::vector<char> data(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) benchmark::DoNotOptimize(rankscope::crc32c(data.data(), data.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32c)->Arg(1 << 20);

void BM_WriteEventChunks(benchmark::State& state) {
  const std::string path = temp_path("bench-write-");
  auto events = make_events(static_cast<size_t>(state.range(0)));
  rankscope::ShardWriter writer;
  writer.open(path, rankscope::RankMetadata{}, 0);
  for (auto _ : state) {
    if (!writer.write_events(events)) state.SkipWithError(writer.error().c_str());
    if (writer.bytes_written() > (1u << 30)) {  // keep the file bounded
      writer.open(path, rankscope::RankMetadata{}, 0);
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  std::filesystem::remove(path);
}
BENCHMARK(BM_WriteEventChunks)->Arg(16384);

void BM_ScanShard(benchmark::State& state) {
  const std::string path = temp_path("bench-scan-");
  auto events = make_events(16384);
  {
    rankscope::ShardWriter writer;
    writer.open(path, rankscope::RankMetadata{}, 0);
    for (int i = 0; i < 64; ++i) writer.write_events(events);
    writer.close(rankscope::Counters{}, 0);
  }
  const rankscope::ShardFile file(path);
  for (auto _ : state) benchmark::DoNotOptimize(file.scan().event_count);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 64 * 16384);
  std::filesystem::remove(path);
}
BENCHMARK(BM_ScanShard);

}  // namespace

BENCHMARK_MAIN();
