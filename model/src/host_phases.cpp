#include "rankscope/model/host_phases.h"

#include <array>
#include <cctype>
#include <string>

namespace rankscope {
namespace {

struct Prefix {
  std::string_view text;
  HostPhase phase;
};
// torch's own names, matched as they are written.
constexpr Prefix kTorchPrefixes[] = {
    {"enumerate(DataLoader)#", HostPhase::kDataLoading},
    {"DistributedDataParallel.forward", HostPhase::kForward},
    {"autograd::engine::evaluate_function: ", HostPhase::kBackward},
    {"Optimizer.step#", HostPhase::kOptimizer},
    {"Optimizer.zero_grad#", HostPhase::kOptimizer},
};

struct Word {
  std::string_view text;
  HostPhase phase;
};
// Names users give their own ranges, once normalised (below).
constexpr Word kWords[] = {
    {"forward", HostPhase::kForward},       {"forward pass", HostPhase::kForward},
    {"fwd", HostPhase::kForward},           {"backward", HostPhase::kBackward},
    {"backward pass", HostPhase::kBackward}, {"bwd", HostPhase::kBackward},
    {"optimizer", HostPhase::kOptimizer},   {"optimizer step", HostPhase::kOptimizer},
    {"data loading", HostPhase::kDataLoading}, {"dataloader", HostPhase::kDataLoading},
};

constexpr std::array<std::string_view, kHostPhaseCount> kNames = {"none", "data loading", "forward", "backward",
                                                                  "optimizer"};

bool is_separator(char c) { return c == '#' || c == ' ' || c == '_' || c == '.'; }

// Lower case, separators around the name dropped, those within it one space.
std::string normalised(std::string_view name) {
  std::string out;
  for (const char c : name) {
    if (is_separator(c)) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

HostPhase host_phase(std::string_view range_name) {
  for (const Prefix& prefix : kTorchPrefixes) {
    if (range_name.starts_with(prefix.text)) return prefix.phase;
  }
  // Users' names are short; a long one is none of them.
  if (range_name.size() > 32) return HostPhase::kNone;
  const std::string name = normalised(range_name);
  for (const Word& word : kWords) {
    if (name == word.text) return word.phase;
  }
  return HostPhase::kNone;
}

std::string_view host_phase_name(HostPhase phase) {
  const auto index = static_cast<size_t>(phase);
  return index < kNames.size() ? kNames[index] : "none";
}

}  // namespace rankscope
