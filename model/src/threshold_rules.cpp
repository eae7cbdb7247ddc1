#include "rankscope/model/threshold_rules.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "rankscope/model/error.h"
#include "rankscope/model/input_files.h"

namespace rankscope {

std::vector<WordLine> read_word_lines(const std::string& path, std::string_view what) {
  require_regular_file(path);
  const std::string described = "the " + std::string(what) + " " + path;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw Error("cannot read " + described + ": " + std::strerror(errno));
  // Rule files and baselines are a few lines typed or written by rankscope:
  // anything far larger is another file, and is not read into memory whole.
  std::string text(kLargestWordFileBytes + 1, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), file));
  const bool failed = std::ferror(file) != 0;
  const int read_errno = errno;
  std::fclose(file);
  if (failed) throw Error("cannot read " + described + ": " + std::strerror(read_errno));
  if (text.size() > kLargestWordFileBytes) {
    throw Error(path + ": larger than " + std::to_string(kLargestWordFileBytes >> 10) + " KiB: not a " +
                std::string(what) + " (a few lines of text)");
  }
  std::vector<WordLine> lines;
  int number = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view content = std::string_view(text).substr(start, end - start);
    start = end + 1;
    WordLine line{{}, path + ":" + std::to_string(++number)};
    if (content.find('\0') != std::string_view::npos) {
      throw Error(line.where + ": a NUL byte: not a " + std::string(what) + " (text)");
    }
    std::istringstream stream(std::string(content.substr(0, content.find('#'))));
    for (std::string word; stream >> word;) line.words.push_back(word);
    if (!line.words.empty()) lines.push_back(std::move(line));
  }
  return lines;
}

std::optional<double> parse_finite_number(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

ThresholdRule parse_threshold_rule(const WordLine& line) {
  const std::vector<std::string>& w = line.words;
  if (w.size() < 3 || w.size() > 4 || (w[1] != ">=" && w[1] != "<=") || (w.size() == 4 && w[3] != "baseline")) {
    throw Error(line.where +
                ": a rule is METRIC >= VALUE or METRIC <= VALUE, then 'baseline' when VALUE is a ratio to the baseline");
  }
  const std::optional<double> threshold = parse_finite_number(w[2]);
  if (!threshold || *threshold < 0) throw Error(line.where + ": '" + w[2] + "' is no number of 0 or more");
  return {w[0], w[1] == ">=", *threshold, w.size() == 4,
          w[0] + " " + w[1] + " " + w[2] + (w.size() == 4 ? " baseline" : ""), line.where};
}

bool keeps_rule(const ThresholdRule& rule, double value, double reference) {
  const double limit = rule.threshold * reference;
  return rule.at_least ? value >= limit : value <= limit;
}

}  // namespace rankscope
