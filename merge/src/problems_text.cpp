#include "rankscope/merge/problems_text.h"

#include "rankscope/model/text.h"

namespace rankscope {

std::string merge_warnings_text(const MergeResult& result, const char* command) {
  std::string text;
  for (const auto& problem : result.problems) text += std::string("rankscope ") + command + ": warning: " + problem + "\n";
  return text;
}

std::string missing_and_dead_ranks_text(const MergeResult& result, const char* inputs) {
  std::string text;
  if (!result.missing_ranks.empty()) {
    text += std::string("missing ranks (no ") + inputs + "): " + format_rank_list(result.missing_ranks) + "\n";
  }
  if (!result.dead_ranks.empty()) {
    text += "dead ranks (shard without its end record): " + format_rank_list(result.dead_ranks) + "\n";
  }
  return text;
}

}  // namespace rankscope
