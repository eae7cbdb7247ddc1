// Writes report_html() of a hand-built Report (sample_reports.h) for the
// headless-browser test: write_report_page OUT.html RANKS STEPS.
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "rankscope/analysis/report.h"
#include "sample_reports.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s OUT.html RANKS STEPS\n", argv[0]);
    return 2;
  }
  const int ranks = std::atoi(argv[2]);
  const int steps = std::atoi(argv[3]);
  // Host names that need escaping show whether the browser still sees the plots.
  rankscope::analysis::Report report = rankscope::test::sample_report(ranks, steps, /*slow_rank=*/ranks / 3);
  if (ranks > 0) report.profile.ranks[0].host = "<b>&\"'";
  std::ofstream out(argv[1], std::ios::binary);
  out << rankscope::analysis::report_html(report);
  return out.good() ? 0 : 1;
}
