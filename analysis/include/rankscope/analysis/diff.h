// Two runs compared (docs/diff.md): the figures of a report with their
// per-step samples, which a baseline file keeps, and the changes from one run
// to another, each tested against the runs' own step-to-step variation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/analysis/report.h"

namespace rankscope::analysis {

// A baseline file's format: a newer one is refused by name.
inline constexpr int kBaselineFormatVersion = 1;

// One figure of a run: over the job (rank −1) or one rank, with one sample
// per step where the figure is measured per step (the warm-up step left out),
// or a single value where it is not (a bucket's bandwidth, a kernel's total).
struct Figure {
  std::string metric;   // "step_ns", "exposed_wait_ns", "gpu.kernel_ns", "kernel.total_ns:<name>", ...
  int32_t rank = -1;    // −1: the job
  std::string unit;     // "ns", "bytes", "GB/s", "%", "count"
  bool higher_is_better = false;
  std::vector<double> samples;  // per step; empty for a single value
  double value = 0;     // the median of the samples, or the single value
};

struct RunFigures {
  std::string path;          // the timeline (or baseline) they came from
  int32_t world_size = 0;
  bool gpu = false;
  int64_t steps = 0;         // steps measured, the warm-up left out
  std::string damage;        // what of a damaged timeline its figures leave out; empty when sound
  std::vector<Figure> figures;
};

// The name of every figure run_figures writes; a family of one value per
// bucket, kernel or class ends in ':' ("kernel.total_ns:"), its members'
// names follow it.
std::vector<std::string> figure_families();

// The figures of a report: per step for the job (each step's mean over the
// ranks that ran it) and per rank, the first step left out as warm-up.
RunFigures run_figures(const Report& report);

// A baseline file (text, one figure a line: docs/diff.md) and back. Reading throws Error naming
// the file and what is wrong where (a newer format is refused by name).
std::string baseline_text(const RunFigures& figures);
RunFigures read_baseline_file(const std::string& path);

struct Change {
  std::string metric;
  int32_t rank = -1;          // −1: the job
  std::string unit;
  double base = 0, now = 0;   // medians, or single values
  double ratio = 0;           // now / base; NaN where base is 0
  double p_value = -1;        // Mann–Whitney U, two-sided, Holm-adjusted over the job's or the ranks' figures; −1: not tested
  bool significant = false;
  bool regression = false;    // significant and worse
  std::string untested;       // why no test was made ("3 steps in the base run: 4 are needed"); empty when tested
  bool single_value = false;  // one value a run (a bucket, a kernel's total): nothing to test, ever
  double step_ns_explained = 0;  // |now − base| of a figure in ns a step, which orders the changes
  size_t steps_compared = 0;     // the fewer steps of the two runs, where tested
};

struct DiffOptions {
  double alpha = 0.05;           // after Holm's correction
  double min_relative = 0.05;    // smaller changes are not significant, whatever the test says
  // A figure in ns must also move by this share of the base run's median
  // step: two runs of one job on a shared machine differ by about 1 % of the
  // step in one figure or another, which the runs' own steps cannot show.
  double min_step_share = 0.02;
  size_t min_samples = 4;        // per side: below, α = 0.05 cannot be reached
};

// What a rule of --fail-on made of one figure (docs/diff.md, "Gating").
struct RuleVerdict {
  std::string rule;     // as written, with its FILE:LINE or "default"
  std::string metric;   // the figure judged; the rule's metric where it matched none
  int32_t rank = -1;    // −1: the job
  enum class Outcome { kept, broken, not_judged } outcome = Outcome::kept;
  std::string why;      // the figures, or why the rule could not judge
};

struct DiffReport {
  std::string base_path, new_path;
  std::vector<std::string> notes;  // what could not be compared and why (world sizes differ, ...)
  std::vector<Change> changes;     // significant ones first, by step time explained; then the rest
  int64_t tested = 0;              // figures tested
  std::string rules_source;        // --fail-on's rules: a file, or "default"; empty without --fail-on
  std::vector<RuleVerdict> verdicts;  // the broken first, then those not judged; the kept are only counted
  int64_t rules_kept = 0;
  bool regression() const;
  bool rule_broken() const;
};
DiffReport diff_runs(const RunFigures& base, const RunFigures& now, const DiffOptions& options = {});

// A figure's value as the writers print it ("12.3 ms", "1.50 GiB"); "-"
// where it was not measured.
std::string figure_text(double value, const std::string& unit);

std::string diff_text(const DiffReport& diff);  // fits one screen
std::string diff_json(const DiffReport& diff);  // docs/diff.md
std::string diff_html(const DiffReport& diff);  // one self-contained page

// Mann–Whitney U, two-sided p of two samples: exact where both have at most
// 12 values and no ties, else the normal approximation with the tie and
// continuity corrections.
double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace rankscope::analysis
