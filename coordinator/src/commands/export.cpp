// rankscope export TIMELINE --perfetto FILE --chrome FILE --kineto DIR --otf2 DIR [selection]
#include <cstdio>
#include <deque>
#include <optional>

#include "rankscope/analysis/critical_path.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/analysis/work_share.h"
#include "rankscope/exporters/export.h"
#include "command.h"
#include "outputs.h"
#include "rankscope/model/error.h"
#include "rankscope/model/text.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::cli {
namespace {

struct ExportCommand {
  std::string timeline, perfetto, chrome, kineto, otf2, ranks, time, steps;
  uint64_t warn_size_mb = 1000;
  bool overwrite = false;
  bool critical_path = false;
};

// What one export wrote, counted as its readers count it: trace viewers'
// tracks and flows, a Kineto file per rank, OTF2's locations
// (docs/export.md).
std::string written_counts(const ExportResult& r) {
  const ExportCounts& c = r.counts;
  auto n = [](uint64_t count) { return std::to_string(count); };
  switch (r.format) {
    case ExportFormat::kKineto:
      return n(c.processes) + " rank files, " + n(c.slices) + " slices, " + n(c.instants) + " instants, " +
             n(c.counter_samples) + " counter samples, " + n(c.flows) + " flows (" + n(c.launch_flows) + " launch)";
    case ExportFormat::kOtf2:
      return n(c.processes) + " ranks, " + n(c.thread_tracks + c.other_tracks) + " locations (" + n(c.thread_tracks) +
             " threads, " + n(c.other_tracks) + " other), " + n(c.slices) + " slices, " + n(c.instants) + " instants";
    case ExportFormat::kPerfetto:
    case ExportFormat::kChromeJson: break;
  }
  return n(c.processes) + " processes, " + n(c.thread_tracks) + " thread tracks, " + n(c.other_tracks) +
         " other tracks, " + n(c.counter_tracks) + " counter tracks, " + n(c.slices) + " slices, " + n(c.instants) +
         " instants, " + n(c.counter_samples) + " counter samples, " + n(c.flows) + " flows (" +
         n(c.collective_flows) + " collective, " + n(c.launch_flows) + " launch" +
         (c.overlay_slices > 0 ? ", " + n(c.overlay_flows) + " critical path)" : ")") +
         (c.overlay_slices > 0 ? "; the critical path in " + n(c.overlay_slices) + " slices" : "");
}

// The critical path of the steps the report walks (the median's and the
// slowest's), a stretch per segment named by what it was spent on; none,
// said, where the report would say n/a.
std::optional<Overlay> critical_path_overlay(const Timeline& timeline) {
  const analysis::JobProfile job = analysis::build_profile(timeline, analysis::WorkShare{});
  const analysis::CriticalPath path = analysis::critical_path(timeline, job);
  if (!path.unmeasured.empty()) {
    std::fprintf(stderr, "rankscope export: warning: no critical path drawn: %s\n", path.unmeasured.c_str());
    return std::nullopt;
  }
  Overlay overlay{.track = "critical path", .category = "critical path", .chains = {}};
  for (const analysis::StepPath& step : path.steps) {
    std::vector<OverlayStretch>& chain = overlay.chains.emplace_back();
    for (auto segment = step.segments.rbegin(); segment != step.segments.rend(); ++segment) {
      std::string name(analysis::path_category_name(segment->category));
      if (segment->name_id != UINT32_MAX) name += ": " + timeline.string(segment->name_id);
      chain.push_back({segment->rank, segment->begin_ns, segment->end_ns, std::move(name)});
    }
  }
  return overlay;
}

void print_export(const ExportResult& r) {
  const bool begin_open = r.window_begin_ns == INT64_MIN, end_open = r.window_end_ns == INT64_MAX;
  auto bound = [](int64_t ns, bool open) { return open ? std::string("open") : std::to_string(ns); };
  const std::string window = begin_open && end_open
                                 ? std::string("the whole run")
                                 : "window " + bound(r.window_begin_ns, begin_open) + " to " +
                                       bound(r.window_end_ns, end_open) + " ns";
  const double events = static_cast<double>(r.events_written);
  std::printf("wrote %s (%s): %s\n"
              "  ranks %s, %s; %llu events in %.3f s (%.2f M events/s), %llu bytes (%.1f bytes per "
              "event, estimated %llu)\n",
              r.output.c_str(), export_format_name(r.format), written_counts(r).c_str(),
              format_rank_list(r.ranks).c_str(), window.c_str(),
              static_cast<unsigned long long>(r.events_written), r.seconds, events / r.seconds * 1e-6,
              static_cast<unsigned long long>(r.bytes), events > 0 ? static_cast<double>(r.bytes) / events : 0.0,
              static_cast<unsigned long long>(r.estimated_bytes));
}

// DIR/ is DIR: its partial folder is DIR.partial, beside it.
std::string folder_path(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

struct Requested {
  const char* option;
  std::string path;
  OutputKind kind;
  ExportFormat format;
};

int run_export(const ExportCommand& command) {
  std::vector<Requested> requested;
  if (!command.perfetto.empty()) {
    requested.push_back({"--perfetto", command.perfetto, OutputKind::kPerfetto, ExportFormat::kPerfetto});
  }
  if (!command.chrome.empty()) {
    requested.push_back({"--chrome", command.chrome, OutputKind::kChromeJson, ExportFormat::kChromeJson});
  }
  if (!command.kineto.empty()) {
    requested.push_back({"--kineto", folder_path(command.kineto), OutputKind::kKinetoFolder, ExportFormat::kKineto});
  }
  if (!command.otf2.empty()) {
    requested.push_back({"--otf2", folder_path(command.otf2), OutputKind::kOtf2Folder, ExportFormat::kOtf2});
  }
  std::vector<Output> outputs;
  for (const Requested& r : requested) outputs.push_back({r.option, r.path, r.kind});
  check_files({command.timeline}, outputs, command.overwrite);
  std::deque<TemporaryPath> partials;
  for (const Output& output : outputs) partials.emplace_back(partial_path(output.path));
  ExportOptions options;
  if (!command.ranks.empty()) options.ranks = parse_rank_list(command.ranks);
  if (!command.time.empty()) options.time = parse_time_selection(command.time);
  if (!command.steps.empty()) options.steps = parse_step_selection(command.steps);  // checked: step_selection_check
  options.warn_bytes = command.warn_size_mb == 0 ? UINT64_MAX : command.warn_size_mb * 1'000'000;
  options.replace_output = command.overwrite;
  options.warn = [](const std::string& text) { std::fprintf(stderr, "rankscope export: warning: %s\n", text.c_str()); };
  const Timeline timeline(command.timeline);
  if (command.critical_path) options.overlay = critical_path_overlay(timeline);
  try {
    for (const Requested& r : requested) print_export(export_timeline(timeline, r.format, r.path, options));
  } catch (const Error&) {
    warn_about_damage("export", timeline);  // damage may be why: nothing left to export
    throw;
  }
  warn_about_damage("export", timeline);
  return 0;
}

}  // namespace

// A petabyte: beyond any trace a viewer opens, and far from overflowing as bytes.
constexpr uint64_t kMaxWarnSizeMb = 1'000'000'000;

Command add_export(CLI::App& parent) {
  auto command = std::make_shared<ExportCommand>();
  CLI::App* app = parent.add_subcommand(
      "export",
      "Write a timeline for other tools: Perfetto protobuf, Chrome JSON, torch.profiler traces (HTA) or OTF2 "
      "(docs/export.md)");
  app->add_option("timeline", command->timeline, "The HDF5 timeline")->required()->check(kNonEmptyPath);
  app->add_option("--perfetto", command->perfetto, "Write native Perfetto protobuf here (.pftrace)")
      ->check(kNonEmptyPath);
  app->add_option("--chrome", command->chrome, "Write Chrome trace-event JSON here (.json)")->check(kNonEmptyPath);
  app->add_option("--kineto", command->kineto,
                  "Write a torch.profiler trace per rank, on the aligned clock, into this folder (for HTA, TraceLens)")
      ->check(kNonEmptyPath);
  app->add_option("--otf2", command->otf2, "Write an OTF2 archive into this folder (for Vampir, Scalasca)")
      ->check(kNonEmptyPath);
  add_overwrite_flag(*app, command->overwrite);
  app->add_option("--ranks", command->ranks, "Only these ranks, e.g. 0-3,8")
      ->check(CLI::Validator(
          [](const std::string& text) {
            try {
              parse_rank_list(text, "");
              return std::string();
            } catch (const Error& e) {
              return std::string(e.what());
            }
          },
          "RANKS"));
  app->add_option("--time", command->time,
                  "Only events overlapping START:END: ns on the timeline, or +N[ns|us|ms|s] from the job's first event; "
                  "either end may be empty (e.g. +1.5s:+2s)")
      // A usage error like any other (status 2), before the timeline is read.
      ->check(CLI::Validator(
          [](const std::string& text) {
            try {
              parse_time_selection(text);
            } catch (const Error& e) {
              const std::string_view what = e.what();
              return std::string(what.starts_with("--time: ") ? what.substr(8) : what);  // CLI11 names the option
            }
            return std::string();
          },
          "START:END"));
  app->add_option("--steps", command->steps, "Only the time of ProfilerStep#A to #B, both included: A:B, A, A: or :B")
      ->check(step_selection_check(false));
  app->add_flag("--critical-path", command->critical_path,
                "Draw the critical path of the median and the slowest step on a track of each rank it crosses, "
                "joined by flows from rank to rank (Perfetto and Chrome JSON; the timeline is read as by report "
                "first)");
  app->add_option("--warn-size-mb", command->warn_size_mb,
                  "Warn, with a smaller selection, when the output is estimated beyond this many MB (0: never)")
      ->check(CLI::Range(uint64_t{0}, kMaxWarnSizeMb))
      ->capture_default_str();
  app->callback([command] {
    if (command->perfetto.empty() && command->chrome.empty() && command->kineto.empty() && command->otf2.empty()) {
      throw CLI::ValidationError("give one or more of --perfetto FILE, --chrome FILE, --kineto DIR, --otf2 DIR");
    }
    if (command->critical_path && command->perfetto.empty() && command->chrome.empty()) {
      throw CLI::ValidationError("--critical-path is drawn in --perfetto and --chrome outputs: give one of them");
    }
  });
  return {app, [command] {
            remove_temporary_paths_on_signals();
            return run_reporting_errors("export", [&] { return run_export(*command); });
          }};
}

}  // namespace rankscope::cli
