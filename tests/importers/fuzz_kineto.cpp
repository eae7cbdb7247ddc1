// libFuzzer target for the Kineto importer: any bytes as a trace file, read
// and translated as `rankscope import-kineto` does (without a shard). Built
// with clang by scripts/fuzz.sh; the replay test runs the corpus of
// inputs that once crashed through the normal build.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kineto_trace.h"
#include "rankscope/model/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rankscope::kineto::ImportSettings settings = [] {
    rankscope::kineto::ImportSettings s;
    s.comm_kernel_patterns = {"^deep_ep::"};
    return s;
  }();
  rankscope::kineto::TraceImport trace("fuzz_rank-0.json", "", settings);
  try {
    trace.read_text(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const rankscope::Error&) {
    // Not a trace at all: refused with a message, which is the contract.
  }
  // What a translation yields must match across ranks without failing.
  rankscope::kineto::RankCollectives copy = trace.collectives();
  copy.rank = 1;
  rankscope::kineto::align_ranks({trace.collectives(), copy});
  return 0;
}
