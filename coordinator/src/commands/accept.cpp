// mpirun -n NODES rankscope accept [--level quick|full] [--links pairs|groups|auto] [--format text|json|html]
//   [-o FILE] [--rules FILE]
//   [--baseline FILE] [--save-baseline FILE] [--timeline FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "command.h"
#include "outputs.h"
#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/summary.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/acceptance/measure.h"
#include "rankscope/acceptance/node_ranks.h"
#include "rankscope/acceptance/rules.h"
#include "rankscope/acceptance/reference_job.h"
#include "rankscope/acceptance/run_timeline.h"
#include "rankscope/merge/problems_text.h"
#include "rankscope/model/error.h"
#include "rankscope/model/temporary_paths.h"
#include "rankscope/mpi_exchange/gather.h"

namespace rankscope::cli {
namespace {

// What judges the run besides the fleet: the rule file, the baseline, and the
// baseline's default rules for metrics no rule names.
struct Judgement {
  acceptance::RuleFile rule_file;
  std::optional<acceptance::Baseline> baseline;
};

Judgement read_judgement(const std::string& rules_path, const std::string& baseline_path, const std::string& level) {
  Judgement judgement;
  if (!rules_path.empty()) judgement.rule_file = acceptance::read_rule_file(rules_path);
  if (!baseline_path.empty()) {
    judgement.baseline = acceptance::read_baseline(baseline_path);
    judgement.rule_file.fleet.ring_baseline_gbps = judgement.baseline->ring_gbps;
    judgement.rule_file.fleet.ring_baseline_nodes = judgement.baseline->nodes;
    for (ThresholdRule& rule : acceptance::default_baseline_rules(*judgement.baseline)) {
      const auto named = [&](const ThresholdRule& r) { return r.metric == rule.metric; };
      if (std::none_of(judgement.rule_file.rules.begin(), judgement.rule_file.rules.end(), named))
        judgement.rule_file.rules.push_back(std::move(rule));
    }
  }
  acceptance::check_rules(judgement.rule_file.rules, judgement.baseline ? &*judgement.baseline : nullptr, level);
  return judgement;
}

acceptance::Acceptance judged_by(const acceptance::Measurements& measured, const Judgement& judgement) {
  acceptance::Acceptance judged = acceptance::judge(measured, judgement.rule_file.fleet);
  acceptance::apply_rules(judged, measured, judgement.rule_file.rules, judgement.baseline ? &*judgement.baseline : nullptr);
  return judged;
}

OutputKind accept_kind(const std::string& format) {
  return format == "json" ? OutputKind::kAcceptJson : format == "html" ? OutputKind::kAcceptHtml : OutputKind::kAcceptText;
}

std::string summary(const std::string& format, const acceptance::Acceptance& judged,
                    const acceptance::Measurements& measured) {
  return format == "json"   ? acceptance::summary_json(judged, measured)
         : format == "html" ? acceptance::summary_html(judged, measured)
                            : acceptance::summary_text(judged);
}

struct AcceptOptions {
  std::string level = "quick";
  std::string format = "text";
  std::string output;  // stdout when empty
  bool overwrite = false;
  bool one_at_a_time = false;
  uint64_t memory_mb = 0;  // 0: the STREAM rule's size
  std::string links = "auto";
  std::string rules, baseline, save_baseline;
  std::string timeline;  // a temporary file when not given
};

// On the first rank of each node: measures, judges, and gives the summary.
// Returns the exit status: 1 when anything fails.
int accept_nodes(const acceptance::NodeRanks& ranks, const AcceptOptions& options) {
  const MPI_Comm nodes = ranks.nodes();
  int process = 0;
  MPI_Comm_rank(nodes, &process);
  const int processes = ranks.node_count();
  if (const int waiting = ranks.job_ranks() - processes; process == 0 && waiting > 0) {
    std::fprintf(stderr, "rankscope accept: %d ranks on %d nodes: the first rank of each node measures it, %d %s\n",
                 ranks.job_ranks(), processes, waiting, waiting == 1 ? "other waits" : "others wait");
  }
  // Every file, before anything is measured, so that a wrong name costs no
  // measurement: outputs that are inputs (the rules, the baseline judged
  // against) or share a file are refused, whatever -f says.
  std::vector<Output> outputs;
  if (!options.output.empty()) outputs.push_back({"-o", options.output, accept_kind(options.format)});
  if (!options.save_baseline.empty())
    outputs.push_back({"--save-baseline", options.save_baseline, OutputKind::kAcceptBaseline});
  if (!options.timeline.empty()) outputs.push_back({"--timeline", options.timeline, OutputKind::kTimeline});
  std::vector<std::string> inputs;
  for (const std::string* input : {&options.rules, &options.baseline})
    if (!input->empty()) inputs.push_back(*input);
  std::optional<TextOutput> output;
  run_on_process_0(nodes, [&] {
    check_files(inputs, outputs, options.overwrite);
    if (!options.output.empty()) output.emplace(options.output, options.overwrite);
  });
  acceptance::Level level = acceptance::level_named(options.level);
  level.one_at_a_time = options.one_at_a_time;
  level.memory_bytes = size_t{options.memory_mb} << 20;
  level.link_screen = acceptance::link_screen_for(options.links, processes);
  // Rank 0 judges; its files are read before anything is measured, so a mistake in them costs no run.
  Judgement judgement;
  run_on_process_0(nodes, [&] {
    judgement = read_judgement(options.rules, options.baseline, options.level);
  });
  std::unique_ptr<TemporaryPath> partial;
  if (!options.timeline.empty()) partial = prepare_timeline_output(nodes, {}, "--timeline", options.timeline, options.overwrite);
  // The summary, to -o or stdout.
  const auto give = [&](const acceptance::Acceptance& judged, const acceptance::Measurements& measured) {
    const std::string text = summary(options.format, judged, measured);
    if (output) {
      output->write(text);
      std::fprintf(stderr, "rankscope accept: wrote %s\n", options.output.c_str());
    } else {
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
    }
  };
  acceptance::RunRecord record([&](const std::string& line) {
    std::fprintf(stderr, "rankscope accept: %d nodes: %s\n", processes, line.c_str());
  });
  // A node lost ends the job: mpirun signals every rank, and kills them a second later
  // (odls_base_sigkill_timeout). Meanwhile the ranks alive go on answering rank 0's roll calls,
  // which tells rank 0 the silent ones; it then judges what was measured.
  constexpr auto kStill = std::chrono::milliseconds(200), kAtMost = std::chrono::milliseconds(600);
  const LastWords cut_short([&](int signal_number) {
    if (process != 0) {
      std::this_thread::sleep_for(kAtMost);
      return;
    }
    const auto measured = record.cut_short_when_still(
        std::string("the job was ended by SIG") + sigabbrev_np(signal_number) + ", as mpirun does when a node is lost",
        kStill, kAtMost);
    if (!measured) return;
    try {
      give(judged_by(*measured, judgement), *measured);
    } catch (const Error& e) {
      std::fprintf(stderr, "rankscope accept: error: %s\n", e.what());
    }
  });
  // The reference job is analysed on the timeline, so there is always one (a temporary file
  // when none was asked for).
  acceptance::RunTimeline timeline(nodes, options.timeline);
  acceptance::Measurements measured =
      acceptance::measure(nodes, level, timeline, record, judgement.rule_file.fleet,
                          [&](const acceptance::Measurements& so_far) { return judged_by(so_far, judgement); });
  timeline.sync_clock();
  acceptance::run_reference_job(nodes, acceptance::reference_job_size(options.level),
                                std::max(acceptance::usable_cpus_by_core().cores, 1), timeline, [&](const std::string& line) {
                                  if (process == 0) record.begin_stage(line);
                                });
  const MergeResult merged = timeline.write(measured);
  int verdict = 0;
  run_on_process_0(nodes, [&] {
    record.finish();
    std::fputs((merge_warnings_text(merged, "accept") + missing_and_dead_ranks_text(merged, "shard")).c_str(), stderr);
    acceptance::analyse_reference_job(timeline.path(), measured);
    const acceptance::Acceptance judged = judged_by(measured, judgement);
    if (!options.save_baseline.empty() && judged.verdict == acceptance::Verdict::pass) {
      TextOutput(options.save_baseline, options.overwrite).write(acceptance::baseline_text(measured, options.level));
      std::fprintf(stderr, "rankscope accept: baseline %s written\n", options.save_baseline.c_str());
    } else if (!options.save_baseline.empty()) {
      std::fprintf(stderr, "rankscope accept: no baseline written: a run that fails is no baseline\n");
    }
    give(judged, measured);
    verdict = judged.verdict == acceptance::Verdict::fail ? 1 : 0;
  });
  return verdict;
}

}  // namespace

Command add_accept(CLI::App& parent) {
  auto options = std::make_shared<AcceptOptions>();
  CLI::App* app = parent.add_subcommand(
      "accept", "Cluster acceptance: run under mpirun with a rank per node (or per GPU: the first rank of each node "
                "measures it); measures every node and every link and judges them (exit status 1 when anything fails)");
  app->add_option("--level", options->level, "quick (a minute or less) or full")
      ->check(CLI::IsMember({"quick", "full"}));
  app->add_flag("--one-at-a-time", options->one_at_a_time,
               "Measure one node and one link at a time (slower), each end of the link on a core of its own: for "
               "nodes that share cores, memory or an uplink, such as virtual machines on one host or test hosts");
  app->add_option("--memory-mb", options->memory_mb,
                  "The memory check's triad over this many MiB (its three arrays together) instead of the STREAM "
                  "rule's 12 times the largest last-level cache (within a quarter of the memory available): for "
                  "nodes whose cache makes that take too long, such as test hosts sharing one machine")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app->add_option("--links", options->links,
                  "How links are screened: pairs (every pair of nodes), groups (group testing: rings of nodes, "
                  "bisected where slow, suspects confirmed with a sound node) or auto (pairs up to " +
                      std::to_string(acceptance::kAllPairsUpTo) + " nodes, groups above)")
      ->check(CLI::IsMember({"pairs", "groups", "auto"}));
  add_document_options(*app, "summary", options->format, options->output, options->overwrite);
  app->add_option("--rules", options->rules,
                  "Rule file: thresholds on metrics, absolute or against the baseline, and the fleet comparison's "
                  "settings (docs/accept.md)");
  app->add_option("--baseline", options->baseline,
                  "Baseline from --save-baseline: every metric must lie within 5 % of it unless the rule file "
                  "says otherwise");
  app->add_option("--save-baseline", options->save_baseline,
                  "Write the fleet's median of each metric as a baseline for later runs (from a healthy run)");
  app->add_option("--timeline", options->timeline,
                  "Also write the run as an HDF5 timeline (every stage, transfer and the reference job's steps) for "
                  "`rankscope report` and `export`")
      ->check(kNonEmptyPath);
  return {app, [options] {
            int verdict = 0;
            const int status = run_under_mpi("accept", LoneRankZero::kRefused, [&](int, int) {
              const acceptance::NodeRanks ranks(MPI_COMM_WORLD);
              int outcome = 0;
              if (ranks.measures()) {
                try {
                  outcome = accept_nodes(ranks, *options);
                } catch (const Error&) {
                  acceptance::share_status(MPI_COMM_WORLD, 1);
                  throw;
                }
              }
              verdict = acceptance::share_status(MPI_COMM_WORLD, outcome);
            });
            return status != 0 ? status : verdict;
          }};
}

}  // namespace rankscope::cli
