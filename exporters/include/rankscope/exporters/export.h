// Exports a timeline for other tools: trace viewers (native Perfetto
// protobuf from our own encoder, Chrome JSON), with one process per rank,
// tracks per thread, CUDA stream, NCCL and MPI communicator and NVTX domain,
// counters derived from the events, and flows across ranks; torch.profiler's
// trace format, one file per rank on the aligned clock (for HTA and
// TraceLens); and OTF2 archives (for Vampir and Scalasca). Streams rank by
// rank: memory holds one block of events plus the collectives' matching
// (ranks × collectives), never the timeline. Layout, selections and limits:
// docs/export.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/model/steps.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope {

enum class ExportFormat { kPerfetto, kChromeJson, kKineto, kOtf2 };
const char* export_format_name(ExportFormat format);
// Whether the format's output is a folder (a file per rank, an OTF2
// archive) rather than one file.
bool export_writes_folder(ExportFormat format);

// One end of a --time window: open, nanoseconds on the timeline, or an offset
// from the job's first event.
struct TimeBound {
  enum class Kind { kOpen, kAbsolute, kFromJobStart } kind = Kind::kOpen;
  int64_t ns = 0;
};
struct TimeSelection {
  TimeBound begin, end;
};

// The parser for --time; it throws Error quoting the bad text. (Rank lists:
// parse_rank_list in rankscope/model/text.h; steps: rankscope/model/steps.h.)
// "START:END", each end empty, N (timeline ns) or +N<unit> (from the job's
// first event), N an integer or decimal, unit ns, us, ms or s (default ns).
TimeSelection parse_time_selection(std::string_view text);

// Stretches of time laid over the ranks' events, on a track of their own in
// each rank's process: an analysis's finding drawn where it happened (the
// export command's --critical-path). Perfetto and Chrome JSON draw them.
struct OverlayStretch {
  int32_t rank = -1;
  int64_t begin_ns = 0, end_ns = 0;
  std::string name;
};
struct Overlay {
  std::string track;     // the track's name in each rank's process
  std::string category;  // every stretch's category
  // Chains of stretches, each in time order: consecutive stretches of a
  // chain on different ranks are joined by a flow, the earlier to the later.
  std::vector<std::vector<OverlayStretch>> chains;
};

struct ExportOptions {
  std::optional<std::vector<int32_t>> ranks;  // nothing: every rank
  std::optional<TimeSelection> time;
  std::optional<StepSelection> steps;         // narrows the window to these steps' ranges (no period)
  // Warn (through `warn`, before writing) when the estimated output is larger.
  uint64_t warn_bytes = uint64_t{1} << 30;
  std::function<void(const std::string&)> warn;
  // Whether an output that exists when the trace is complete is replaced
  // (--overwrite); else one that appeared meanwhile fails the export.
  bool replace_output = false;
  std::optional<Overlay> overlay;  // drawn by Perfetto and Chrome JSON, left out of the others
};

// What was written, counted as trace viewers count it (the independent
// checker's --summary uses the same names; docs/export.md).
struct ExportCounts {
  uint64_t processes = 0;       // one per rank written
  uint64_t thread_tracks = 0;   // host threads (their first lane)
  uint64_t other_tracks = 0;    // streams, communicators, NVTX domains, extra lanes
  uint64_t counter_tracks = 0;
  uint64_t slices = 0;          // events with begin < end
  uint64_t instants = 0;        // events with begin == end
  uint64_t counter_samples = 0;
  uint64_t flows = 0;           // edges, each on exactly two events
  uint64_t collective_flows = 0;
  uint64_t launch_flows = 0;
  uint64_t overlay_slices = 0;  // of `slices`, the overlay's stretches
  uint64_t overlay_flows = 0;
};

struct ExportResult {
  ExportCounts counts;
  std::string output;
  ExportFormat format = ExportFormat::kPerfetto;
  int64_t window_begin_ns = INT64_MIN;  // the resolved selection
  int64_t window_end_ns = INT64_MAX;
  std::vector<int32_t> ranks;           // selected ranks that had events in the window
  uint64_t events_read = 0;             // rows of /events visited while writing
  uint64_t events_written = 0;          // slices + instants + source counter samples
  uint64_t estimated_bytes = 0;
  uint64_t bytes = 0;
  double seconds = 0;                   // both passes, writing included
};

// Writes `output`, a file or a folder (export_writes_folder), as
// OUTPUT.partial, renamed when complete. Throws Error naming the timeline or
// the output.
ExportResult export_timeline(const Timeline& timeline, ExportFormat format, const std::string& output,
                             const ExportOptions& options = {});

}  // namespace rankscope
