// libFuzzer target for the timeline reader and everything that reads a
// timeline: `rankscope info` (its checks), `report` (every analysis, every
// format) and `export` (both formats). The first byte picks the input's kind:
//   even: the rest is a whole file, as a damaged disk or a stranger gives it
//         (found mostly by HDF5's checksums and structure checks);
//   odd:  the rest is edits of the seed timeline (RANKSCOPE_FUZZ_SEED_TIMELINE),
//         up to 64, 12 bytes each: table, field, row (16 bits), value (64 bits), made
//         through HDF5 so the checksums hold and only the reader's own value
//         checks stand between the edit and the analyses.
// A rankscope::Error is the contract for a file it cannot use; anything else
// (a crash, another exception, a sanitizer report) is a bug. Built with
// clang by scripts/fuzz.sh; the replay test runs the corpus with the normal build.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "rankscope/analysis/report.h"
#include "rankscope/coordinator/info.h"
#include "rankscope/exporters/export.h"
#include "rankscope/model/error.h"
#include "rankscope/timeline/timeline.h"
#include "timeline_damage.h"

namespace {

struct Table {
  const char* name;
  std::vector<std::string> fields;  // members, or column numbers of a table of plain values
};

std::vector<std::string> columns(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(std::to_string(i));
  return out;
}

const std::vector<Table>& tables() {
  static const std::vector<Table> all = {
      {"/events", {"begin_ns", "end_ns", "correlation_id", "comm_hash", "seq", "bytes", "name_id", "track", "kind", "op",
                   "peer", "datatype", "algorithm", "protocol", "flags"}},
      {"/ranks", {"rank", "local_rank", "node_id", "status", "pid", "event_offset", "event_count", "track_offset",
                  "track_count", "counter_offset", "counter_count", "first_ns", "last_ns", "last_heard_ns",
                  "start_wall_ns"}},
      {"/event_counts", columns(rankscope::kEventKindCount)},
      {"/tracks", {"rank", "id", "os_id", "name_id", "device", "type"}},
      {"/counters", {"rank", "name_id", "value"}},
      {"/clock", {"rank", "synced", "offset_ns", "drift_ppm", "bound_ns", "point_offset", "point_count",
                  "repair_shift_ns"}},
      {"/clock_points", {"rank", "local_ns", "offset_ns", "bound_ns"}},
      {"/strings/offsets", columns(1)},
      {"/strings/bytes", columns(1)},
  };
  return all;
}

// Reads the timeline as every command does; only rankscope::Error may end it.
void read_as_every_command(const std::string& path, const std::string& scratch) {
  try {
    const rankscope::Timeline timeline(path);
    const rankscope::EventsRead events_read = timeline.check_events();
    rankscope::info_text(timeline, events_read);
    rankscope::info_json(timeline, events_read);
    for (bool hta : {false, true}) {
      const rankscope::analysis::Report report = rankscope::analysis::make_report(timeline, {hta});
      rankscope::analysis::report_text(report);
      rankscope::analysis::report_json(report);
      rankscope::analysis::report_html(report);
    }
    rankscope::ExportOptions options;
    options.warn = [](const std::string&) {};
    options.replace_output = true;  // both formats into one scratch file
    for (auto format : {rankscope::ExportFormat::kPerfetto, rankscope::ExportFormat::kChromeJson}) {
      try {
        rankscope::export_timeline(timeline, format, scratch + ".trace", options);
      } catch (const rankscope::Error&) {
        // e.g. nothing left to export
      }
    }
  } catch (const rankscope::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string scratch =
      (std::filesystem::temp_directory_path() / ("rankscope-fuzz-timeline-" + std::to_string(::getpid()))).string();
  const std::string path = scratch + ".h5";
  if ((data[0] & 1) == 0) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data + 1), static_cast<long>(size - 1));
  } else {
    const char* seed = std::getenv("RANKSCOPE_FUZZ_SEED_TIMELINE");
    if (!seed) std::abort();  // a harness without its seed tests nothing
    std::filesystem::copy_file(seed, path, std::filesystem::copy_options::overwrite_existing);
    // Each edit reopens the file: past 64 the input only slows the fuzzer down.
    for (size_t at = 1; at + 12 <= size && at < 1 + 64 * 12; at += 12) {
      const Table& table = tables()[data[at] % tables().size()];
      const std::string& field = table.fields[data[at + 1] % table.fields.size()];
      uint16_t row = 0;
      int64_t value = 0;
      std::memcpy(&row, data + at + 2, 2);
      std::memcpy(&value, data + at + 4, 8);
      try {
        rankscope::testing::set_timeline_value(path, table.name, row, field, value);
      } catch (const rankscope::Error&) {
        // no such row in the seed: the edit is skipped
      }
    }
  }
  read_as_every_command(path, scratch);
  std::filesystem::remove(path);
  std::filesystem::remove(scratch + ".trace");
  return 0;
}
