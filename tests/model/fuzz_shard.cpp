// libFuzzer target for the shard reader: any bytes as a shard, scanned and
// every chunk it finds read, as `rankscope merge` reads it. Damage is
// reported in the scan; a rankscope::Error (not a shard, a version this
// build does not read) is the contract for the rest. Built with clang by
// scripts/fuzz.sh; the replay test runs the corpus with the normal build.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("rankscope-fuzz-" + std::to_string(::getpid()) + ".shard")).string();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), static_cast<long>(size));
  try {
    const rankscope::ShardFile file(path);
    const rankscope::ShardScan scan = file.scan();
    std::vector<rankscope::Event> events;
    for (const rankscope::EventChunkRef& chunk : scan.event_chunks) file.read_events(chunk, events);
  } catch (const rankscope::Error&) {
  }
  std::filesystem::remove(path);
  return 0;
}
