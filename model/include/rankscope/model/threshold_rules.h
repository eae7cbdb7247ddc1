// Rules as data: a text file of thresholds, one a line, "METRIC >= VALUE" or
// "METRIC <= VALUE", then "baseline" when VALUE is a ratio to a baseline;
// `#` starts a comment. `accept` judges its measurements by them, `diff` a
// new run against its base. Each command knows its own metrics.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rankscope {

// The words of a line that has any, its comment left out, with its FILE:LINE.
struct WordLine {
  std::vector<std::string> words;
  std::string where;
};
// Throws Error, with the system's reason, when the file cannot be read or
// is no regular file (a FIFO would be waited on; a folder or /dev/null read
// as an empty file); naming FILE:LINE where a line holds a NUL byte; and
// when the file is larger than kLargestWordFileBytes. `what` names the
// file's kind in the message ("rule file", "baseline").
inline constexpr size_t kLargestWordFileBytes = size_t{1} << 20;
std::vector<WordLine> read_word_lines(const std::string& path, std::string_view what);

// The whole of `text` as a finite number; nothing otherwise.
std::optional<double> parse_finite_number(std::string_view text);

struct ThresholdRule {
  std::string metric;
  bool at_least = true;       // ">=": the figure must be at least the threshold; "<=": at most
  double threshold = 0;       // in the metric's unit, or a ratio to the baseline
  bool of_baseline = false;
  std::string text;           // as written, for the evidence
  std::string where;          // FILE:LINE, or "default" for a command's own rules
};

// A line that is a rule; throws Error naming its FILE:LINE when it is none.
// The metric is the caller's to check.
ThresholdRule parse_threshold_rule(const WordLine& line);

// Whether `value` keeps the rule, against `reference` (the baseline's figure,
// or 1 for an absolute rule).
bool keeps_rule(const ThresholdRule& rule, double value, double reference = 1);

}  // namespace rankscope
