// The few lines the text and HTML reports say of each hang, each deadlock
// and the steps capture windows cut.
#include <algorithm>
#include <string>
#include <vector>

#include "rankscope/analysis/hangs.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/model/format.h"
#include "rankscope/model/text.h"

namespace rankscope::analysis {

// One unfinished collective: who was inside and for how long, and what each
// rank that never came was doing.
std::string describe_hang(const Hang& h) {
  const auto ranges_text = [](const std::vector<std::string>& ranges) {
    std::string text;
    for (const std::string& range : ranges) text += (text.empty() ? "; in ranges " : " > ") + range;
    return text;
  };
  std::vector<int32_t> entered;
  int64_t written_ns = 0, longest_ns = 0, first_entered_ns = INT64_MAX;
  for (const HangEntry& e : h.entered) {
    entered.push_back(e.rank);
    first_entered_ns = std::min(first_entered_ns, e.since_ns);
    written_ns = std::max(written_ns, e.since_ns + e.waited_ns);
    longest_ns = std::max(longest_ns, e.waited_ns);
  }
  std::sort(entered.begin(), entered.end());
  const bool sends = h.op == CommOp::kSend;
  const std::string peer = !h.point_to_point    ? std::string()
                           : h.peer == kNoPeer ? (sends ? " to a rank" : " from a rank")
                                               : (sends ? " to rank " : " from rank ") + std::to_string(h.peer);
  std::string out = "HANG: " + h.call + " #" + std::to_string(h.seq) + peer + " of " +
                    (h.comm.empty() ? "an unknown communicator" : h.comm) + ": rank" + (entered.size() > 1 ? "s " : " ") +
                    format_rank_list(entered) + " inside, up to " + format_duration(longest_ns) + "; ";
  if (h.point_to_point) {
    if (h.missing_ranks.empty()) {
      const bool peer_inside =
          std::any_of(h.entered.begin(), h.entered.end(), [&](const HangEntry& e) { return e.rank == h.peer; });
      return out + (peer_inside ? "rank " + std::to_string(h.peer) + " is inside the matching " +
                                      (sends ? "receive" : "send") + ": the transfer itself did not complete\n"
                    : h.members_known ? "its peer is itself\n"
                                      : "its peer is not in the timeline\n");
    }
  } else if (h.missing_ranks.empty()) {
    out += h.members_known ? "every member entered\n" : "the communicator's other members are not known\n";
    return out;
  }
  if (h.point_to_point) {
    out += "rank " + std::to_string(h.peer) + " had not begun the matching " + (sends ? "receive" : "send") + "\n";
  } else {
    out += "had not entered: rank" + std::string(h.missing_ranks.size() > 1 ? "s " : " ") +
           format_rank_list(h.missing_ranks) + (h.members_known ? "" : " (of the members known)") + "\n";
  }
  for (size_t i = 0; i < h.missing.size() && i < 4; ++i) {
    const MissingRank& m = h.missing[i];
    // "crashed with SIGSEGV …" says the status too.
    const std::string how = m.killed.empty() ? m.status : m.status == "crashed" ? m.killed : m.status + ", " + m.killed;
    out += "  rank " + std::to_string(m.rank) + " (" + how +
           (m.wrote_state ? ", wrote its state" : ", state not written") +
           "): " + (m.inside.empty() ? "in no collective" : "inside " + m.inside) +
           ranges_text(m.open_ranges) +
           (m.last_call.empty() ? "; no call recorded"
                                : "; last call " + m.last_call + " ended " +
                                      format_duration(written_ns - m.last_call_end_ns) + " before the state was written") +
           (m.entered_at_ns != 0 ? "; entered " + format_duration(m.entered_at_ns - first_entered_ns) + " after the first rank"
                                 : std::string()) +
           "\n";
  }
  if (h.missing.size() > 4) out += "  ... " + std::to_string(h.missing.size() - 4) + " more\n";
  return out;
}

// A cycle of ranks waiting for each other's messages, and each one's call.
std::string describe_deadlock(const Deadlock& d) {
  std::string cycle;
  int64_t longest_ns = 0;
  for (const MessageWait& w : d.waits) {
    cycle += std::to_string(w.rank) + " > ";
    longest_ns = std::max(longest_ns, w.waited_ns);
  }
  std::string out = "DEADLOCK: rank" + std::string(d.waits.size() > 1 ? "s " : " ") + cycle +
                    std::to_string(d.waits.front().rank) + " each wait for the next, up to " +
                    format_duration(longest_ns) + "\n";
  for (const MessageWait& w : d.waits) {
    out += "  rank " + std::to_string(w.rank) + ": inside " + w.inside + " for " + format_duration(w.waited_ns) + "\n";
  }
  return out;
}

std::string describe_steps_cut(const JobProfile& job) {
  constexpr size_t kStepsNamed = 4;
  std::string out;
  for (size_t i = 0; i < job.steps_cut.size() && i < kStepsNamed; ++i) {
    const StepCut& cut = job.steps_cut[i];
    out += (i > 0 ? "; step " : "step ") + std::to_string(cut.step) + " on rank" + (cut.ranks.size() > 1 ? "s " : " ") +
           format_rank_list(cut.ranks);
  }
  if (job.steps_cut.size() > kStepsNamed) out += "; " + std::to_string(job.steps_cut.size() - kStepsNamed) + " more steps";
  return out + ": " + (job.steps_cut.size() > 1 ? "they" : "it") +
         " lay partly outside those ranks' windows, where nothing was recorded; their figures there are n/a and left "
         "out";
}

}  // namespace rankscope::analysis
