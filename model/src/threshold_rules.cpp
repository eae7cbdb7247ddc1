#include "rankscope/model/threshold_rules.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "rankscope/model/error.h"
#include "rankscope/model/input_files.h"

namespace rankscope {

std::vector<WordLine> read_word_lines(const std::string& path, std::string_view what) {
  require_regular_file(path);
  std::ifstream file(path);
  if (!file) throw Error("cannot read the " + std::string(what) + " " + path);
  std::vector<WordLine> lines;
  int number = 0;
  for (std::string text; std::getline(file, text);) {
    ++number;
    std::istringstream stream(text.substr(0, text.find('#')));
    WordLine line{{}, path + ":" + std::to_string(number)};
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
