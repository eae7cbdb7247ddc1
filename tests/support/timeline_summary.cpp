// Prints what a timeline holds, as JSON, for tests written in the shell:
// per rank its status, its events counted by "kind name" with their bytes, and its counters; for every
// collective instance (communicator, operation, sequence number) the ranks
// that took part; and how many point-to-point sends found their receive by
// (communicator, sender, receiver, tag, sequence number).
// Usage: timeline_summary TIMELINE
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "rankscope/model/error.h"
#include "rankscope/model/json.h"
#include "rankscope/timeline/timeline.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: timeline_summary TIMELINE\n");
    return 2;
  }
  try {
    const rankscope::Timeline timeline(argv[1]);
    rankscope::JsonWriter json;
    std::map<std::tuple<uint64_t, int, uint64_t>, std::set<int32_t>> instances;
    using Message = std::tuple<uint64_t, int32_t, int32_t, uint64_t, uint64_t>;
    std::multiset<Message> sends, receives;
    json.begin_object().key("ranks").begin_array();
    for (const rankscope::RankInfo& rank : timeline.ranks()) {
      std::map<std::string, uint64_t> counts, bytes;
      uint64_t unordered = 0;
      int64_t last_begin = INT64_MIN;
      std::string first_unordered;
      timeline.for_each_event_block(rank.rank, [&](const std::vector<rankscope::Event>& events) {
        for (const rankscope::Event& e : events) {
          const std::string name = std::string(rankscope::event_kind_name(e.kind)) + " " + timeline.string(e.name_id);
          counts[name]++;
          bytes[name] += e.bytes;
          if (e.begin_ns < last_begin && unordered++ == 0) {
            first_unordered = std::string(rankscope::event_kind_name(e.kind)) + " " + timeline.string(e.name_id) +
                              " begins " + std::to_string(last_begin - e.begin_ns) + " ns before the event ahead of it";
          }
          last_begin = e.begin_ns;
          if (e.kind == rankscope::EventKind::kMpiCollective) {
            instances[{e.comm_hash, static_cast<int>(e.op), e.seq}].insert(rank.rank);
          }
          if (e.kind == rankscope::EventKind::kMpiP2p && e.op == rankscope::CommOp::kSend) {
            sends.insert({e.comm_hash, rank.rank, e.peer, e.correlation_id, e.seq});
          }
          if (e.kind == rankscope::EventKind::kMpiP2p && e.op == rankscope::CommOp::kRecv) {
            receives.insert({e.comm_hash, e.peer, rank.rank, e.correlation_id, e.seq});
          }
        }
      });
      json.begin_object().key("rank").value(rank.rank).key("status").value(rankscope::rank_status_name(rank.status));
      json.key("out_of_order").value(unordered).key("first_out_of_order").value(first_unordered);
      json.key("counts").begin_object();
      for (const auto& [name, n] : counts) json.key(name).value(n);
      json.end_object().key("bytes").begin_object();
      for (const auto& [name, n] : bytes) json.key(name).value(n);
      json.end_object().key("counters").begin_object();
      for (const auto& [name, n] : rank.counters.entries()) json.key(name).value(n);
      json.end_object().end_object();
    }
    json.end_array().key("collectives").begin_array();
    for (const auto& [key, ranks] : instances) {
      json.begin_object().key("op").value(rankscope::comm_op_name(static_cast<rankscope::CommOp>(std::get<1>(key))));
      json.key("seq").value(std::get<2>(key)).key("ranks").value(static_cast<uint64_t>(ranks.size())).end_object();
    }
    json.end_array();
    uint64_t matched = 0;
    for (const Message& m : sends) matched += receives.count(m) > 0;
    json.key("p2p").begin_object().key("sends").value(static_cast<uint64_t>(sends.size()));
    json.key("receives").value(static_cast<uint64_t>(receives.size())).key("matched").value(matched);
    // The first receives without their send, for a failing test to show.
    json.key("unmatched_receives").begin_array();
    int shown = 0;
    for (const Message& m : receives) {
      if (sends.count(m) > 0 || shown++ == 5) continue;
      json.value("comm " + std::to_string(std::get<0>(m)) + " from " + std::to_string(std::get<1>(m)) + " to " +
                 std::to_string(std::get<2>(m)) + " tag " + std::to_string(std::get<3>(m)) + " seq " +
                 std::to_string(std::get<4>(m)));
    }
    json.end_array().end_object();
    json.end_object();
    std::puts(json.str().c_str());
    return 0;
  } catch (const rankscope::Error& e) {
    std::fprintf(stderr, "timeline_summary: %s\n", e.what());
    return 1;
  }
}
