// judge(): the verdicts of an acceptance run, from its measurements alone.
#include <algorithm>
#include <random>
#include <cmath>
#include <cstdio>
#include <map>

#include "figures.h"
#include "fleet.h"
#include "group_testing.h"
#include "rankscope/acceptance/collectives.h"
#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/retests.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/model/text.h"
#include "rankscope/model/statistics.h"

namespace rankscope::acceptance {
namespace {

// A node's figure of one kind (the upper quartile of its repeats) against the fleet's median.
void judge_metric(Acceptance& out, const Measurements& in, const Rules& rules, const char* name, const char* unit,
                  std::vector<double> NodeMeasurements::*repeats) {
  std::vector<double> values;
  for (const NodeMeasurements& node : in.nodes) values.push_back(upper_quartile(node.*repeats));
  const Fleet fleet(values);
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    const auto [verdict, ratio] = fleet.judge(values[i], rules);
    out.nodes[i].checks.push_back({name, printf_string("%.2f ", values[i]) + unit, printf_string("%.2f ", fleet.median) + unit +
                                   " (fleet median of each node's upper quartile of " + std::to_string((in.nodes[i].*repeats).size()) +
                                   " repeats)", ratio, rule_text(rules, "the fleet median"), verdict});
  }
}

// Each GPU's figure of one kind (`figure` of its repeats, which
// `figure_text` and `repeats_noun` name) against the median over every GPU of the fleet: eight GPUs of a
// node are eight figures, and one slow GPU fails its node. A node whose GPUs
// could not be measured fails `gpu.measure` with the reason.
void judge_gpus(Acceptance& out, const Measurements& in, const Rules& rules, const char* name, const char* unit,
                std::vector<double> GpuMeasurements::*repeats, double (*figure)(const std::vector<double>&),
                const char* figure_text, const char* repeats_noun) {
  // A GPU without a figure failed to run (gpu.measure says why): it is no zero in the fleet's median.
  std::vector<double> values;
  for (const NodeMeasurements& node : in.nodes)
    for (const GpuMeasurements& gpu : node.gpus)
      if (!(gpu.*repeats).empty()) values.push_back(figure(gpu.*repeats));
  if (values.empty()) return;
  const Fleet fleet(values);
  size_t at = 0;
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    for (const GpuMeasurements& gpu : in.nodes[i].gpus) {
      if ((gpu.*repeats).empty()) continue;
      const double value = values[at++];
      const auto [verdict, ratio] = fleet.judge(value, rules);
      std::string held;  // how the held GEMM compares with the GPU's own burst, and why its clocks were held back
      if (repeats == &GpuMeasurements::sustained_tflops && !gpu.gemm_tflops.empty()) {
        held = printf_string(", %.2f of its burst", value / upper_quartile(gpu.gemm_tflops)) +
               (gpu.clocks_held_back.empty() ? "" : "; clocks held back by " + gpu.clocks_held_back);
      }
      out.nodes[i].checks.push_back({"gpu" + std::to_string(gpu.index) + "." + name,
                                     printf_string("%.2f ", value) + unit + " (" + gpu.model + ", " + gpu.uuid + held + ")",
                                     printf_string("%.2f ", fleet.median) + unit + " (fleet median of " +
                                         std::to_string(values.size()) + " GPUs' " + figure_text + " " +
                                         std::to_string((gpu.*repeats).size()) + " " + repeats_noun + ")",
                                     ratio, rule_text(rules, "the fleet median"), verdict});
    }
  }
}

void judge_gpu_errors(Acceptance& out, const Measurements& in) {
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    const NodeMeasurements& node = in.nodes[i];
    if (node.inventory.gpus > 0 && !node.gpu_error.empty()) {
      out.nodes[i].checks.push_back({"gpu.measure", node.gpu_error, std::to_string(node.inventory.gpus) + " GPUs found", 0,
                                     "every GPU found is measured", Verdict::fail});
    }
    if (!node.nccl_error.empty()) {
      out.nodes[i].checks.push_back({"collectives.nccl", node.nccl_error, "its part of NCCL's communicators", 0,
                                     "every node with GPUs takes part in NCCL's collectives", Verdict::fail});
    }
  }
}

// Each inventory field against the value most nodes have.
template <typename Field>
void judge_inventory(Acceptance& out, const Measurements& in, const char* name, Field field) {
  std::map<std::string, int> counts;
  for (const NodeMeasurements& node : in.nodes) ++counts[field(node.inventory)];
  const auto majority = std::max_element(counts.begin(), counts.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    const std::string mine = field(in.nodes[i].inventory);
    const bool differs = counts.size() > 1 && mine != majority->first;
    out.nodes[i].checks.push_back({std::string("inventory.") + name, mine, majority->first + " (most nodes)", 1,
                                   "the same on every node", differs ? Verdict::fail : Verdict::pass});
  }
}

// Links: each against the median link, in bandwidth and in latency.
void judge_each_link(Acceptance& out, const Measurements& in, const Rules& rules) {
  std::vector<double> bandwidths, speeds;  // speed: 1 / latency, so that higher is better
  for (const LinkMeasurements& link : in.links) {
    bandwidths.push_back(upper_quartile(link.bandwidth_gbps));
    const double latency = lower_quartile(link.latency_us);
    speeds.push_back(latency > 0 ? 1 / latency : 0);
  }
  const Fleet bandwidth_fleet(bandwidths), speed_fleet(speeds);
  for (size_t l = 0; l < in.links.size(); ++l) {
    const auto [bandwidth_verdict, bandwidth_ratio] = bandwidth_fleet.judge(bandwidths[l], rules);
    const auto [latency_verdict, latency_ratio] = speed_fleet.judge(speeds[l], rules);
    LinkVerdict link;
    link.hosts = {in.nodes[static_cast<size_t>(in.links[l].a)].inventory.host,
                  in.nodes[static_cast<size_t>(in.links[l].b)].inventory.host};
    link.bandwidth_gbps = bandwidths[l];
    link.latency_us = lower_quartile(in.links[l].latency_us);
    link.bandwidth_ratio = bandwidth_ratio;
    link.latency_ratio = latency_ratio;
    link.verdict = worse(bandwidth_verdict, latency_verdict);
    out.links.push_back(link);
  }
}

// All pairs, row and column: each node by what it can do at best, its
// fastest link against the fleet's nodes' fastest (bandwidth and latency
// apart). A node whose best link is slow has every link slow, which is its
// NIC, cable or switch port, and its links are its; a slow link between
// two sound nodes is the link's own. The best link holds on any number of
// nodes, where a node's links against the median link do not: on three,
// a bad node owns two of the three links, and the median link is its own.
void judge_rows(Acceptance& out, const Measurements& in, const Rules& rules) {
  const size_t nodes = in.nodes.size();
  if (in.links.empty() || nodes < 3) return;
  std::vector<double> best_bandwidth(nodes, 0), best_speed(nodes, 0);  // speed: 1 / latency
  for (size_t l = 0; l < in.links.size(); ++l) {
    const LinkVerdict& link = out.links[l];
    const double speed = link.latency_us > 0 ? 1 / link.latency_us : 0;
    for (const int end : {in.links[l].a, in.links[l].b}) {
      const size_t n = static_cast<size_t>(end);
      best_bandwidth[n] = std::max(best_bandwidth[n], link.bandwidth_gbps);
      best_speed[n] = std::max(best_speed[n], speed);
    }
  }
  const Fleet bandwidth_fleet(best_bandwidth), speed_fleet(best_speed);
  std::vector<bool> bad_node(nodes, false);
  for (size_t n = 0; n < nodes; ++n) {
    const auto [bandwidth_verdict, bandwidth_ratio] = bandwidth_fleet.judge(best_bandwidth[n], rules);
    const auto [speed_verdict, speed_ratio] = speed_fleet.judge(best_speed[n], rules);
    const Verdict verdict = worse(bandwidth_verdict, speed_verdict);
    bad_node[n] = verdict == Verdict::fail;
    out.nodes[n].checks.push_back(
        {"network",
         printf_string("%.2f GB/s, %.1f µs", best_bandwidth[n], best_speed[n] > 0 ? 1 / best_speed[n] : 0) +
             " (its best link; " + printf_string("%.2f and %.2f", bandwidth_ratio, speed_ratio) + " of the reference)",
         printf_string("%.2f GB/s, %.1f µs", bandwidth_fleet.median, speed_fleet.median > 0 ? 1 / speed_fleet.median : 0) +
             " (fleet median of each node's best link)",
         std::min(bandwidth_ratio, speed_ratio),
         rule_text(rules, "the fleet median of each node's best link") +
             ", in bandwidth and in latency apart: every link of the node slow means its NIC, cable or switch port",
         verdict});
  }
  for (size_t l = 0; l < in.links.size(); ++l) {
    LinkVerdict& link = out.links[l];
    const size_t a = static_cast<size_t>(in.links[l].a), b = static_cast<size_t>(in.links[l].b);
    if (bad_node[a] || bad_node[b]) {
      link.verdict = Verdict::fail;
      link.cause = "node " + (bad_node[a] ? link.hosts.first : link.hosts.second) + ": every link of it is slow";
    } else if (link.verdict != Verdict::pass) {
      link.cause = "this link";
    }
  }
}

// Group testing: each ring against the first round's median ring (or the
// baseline's ring); each
// node by the last ring it was in, and a suspect (a node bisection left
// alone) by its link with a node known to be sound. Slow there too, the
// fault is the suspect's. Sound there, its slow rings are explained by a
// node that failed in them, or by a slow link of it measured across a ring's
// halves; where nothing explains them, they may have been noise, and the
// suspect is to be retested.
void judge_group_tests(Acceptance& out, const Measurements& in, const Rules& rules) {
  const Bisection bisection = bisect(in.ring_tests, rules);
  RingReference reference = ring_reference(in.ring_tests, rules);
  reference.pairs_load = pairs_load(in.ring_tests, bisection, reference);
  for (int s : bisection.suspects) out.suspects.push_back(in.nodes[static_cast<size_t>(s)].inventory.host);
  const size_t nodes = in.nodes.size();
  std::vector<const RingTest*> last(nodes);
  std::vector<Verdict> last_verdict(nodes, Verdict::pass);
  for (const RingTest& test : in.ring_tests) {
    const auto [verdict, ratio] = judge_ring(test, reference, rules);
    RingVerdict ring{test.round, test.pair, {}, verdict, ring_figure(test), ratio};
    for (int n : test.nodes) {
      ring.hosts.push_back(in.nodes[static_cast<size_t>(n)].inventory.host);
      if (test.pair) continue;
      last[static_cast<size_t>(n)] = &test;
      last_verdict[static_cast<size_t>(n)] = verdict;
    }
    out.ring_tests.push_back(ring);
    // A pair is judged as a ring, against the first round's: the links measured are too few to be
    // judged against each other.
    if (!test.pair || test.nodes.size() != 2) continue;
    for (size_t l = 0; l < in.links.size(); ++l)
      if (std::minmax(in.links[l].a, in.links[l].b) == std::minmax(test.nodes[0], test.nodes[1]))
        out.links[l].verdict = verdict;
  }
  const auto is = [](const std::vector<int>& set, size_t n) {
    return std::find(set.begin(), set.end(), static_cast<int>(n)) != set.end();
  };
  const auto other_end = [](const LinkMeasurements& link, size_t n) {
    return static_cast<size_t>(link.a) == n ? static_cast<size_t>(link.b) : static_cast<size_t>(link.a);
  };
  const auto touches = [](const LinkMeasurements& link, size_t n) {
    return static_cast<size_t>(link.a) == n || static_cast<size_t>(link.b) == n;
  };
  // Each suspect's link with its sound node, where measured.
  const auto confirmation = [&](size_t n) -> std::optional<size_t> {
    for (const auto& [suspect, sound] : bisection.confirmations) {
      if (static_cast<size_t>(suspect) != n) continue;
      for (size_t l = 0; l < in.links.size(); ++l)
        if (touches(in.links[l], n) && other_end(in.links[l], n) == static_cast<size_t>(sound)) return l;
    }
    return std::nullopt;
  };
  std::vector<int> confirmed;  // the suspects slow there too
  for (int s : bisection.suspects) {
    const auto l = confirmation(static_cast<size_t>(s));
    if (l && out.links[*l].verdict == Verdict::fail) confirmed.push_back(s);
  }
  const std::string rule = (reference.baseline_gbps > 0
                                ? printf_string("fail below %.2f", rules.fail_below) + " of the baseline's ring, retest below " +
                                      printf_string("%.2f", rules.retest_below)
                                : printf_string("fail below %.2f", rules.fail_below) +
                                      " of the first round's median ring and beyond " +
                                      printf_string("%.0f", rules.robust_z) +
                                      " robust deviations of the rings on a log scale (retest when within them), retest "
                                      "below " + printf_string("%.2f", rules.retest_below) + " and beyond them") +
                           "; a failed ring is bisected, and a node left alone fails when its link with a node known "
                           "sound fails too; pairs are judged against the reference pairs of sound nodes where those "
                           "ran slower (under the load of their moment)";
  for (size_t n = 0; n < nodes; ++n) {
    if (!last[n]) continue;  // never tested: the run was cut short
    const RingTest& ring = *last[n];
    const auto at = std::find(ring.nodes.begin(), ring.nodes.end(), static_cast<int>(n)) - ring.nodes.begin();
    const double figure = ring_figure(ring);
    Check check{"network",
                printf_string("%.2f GB/s", figure) + " (the slowest node of its last ring, of " +
                    std::to_string(ring.nodes.size()) + " nodes in round " + std::to_string(ring.round + 1) +
                    printf_string("; its own %.2f GB/s)", ring.gbps[static_cast<size_t>(at)]),
                printf_string("%.2f GB/s", reference.gbps()) + " (" + reference.what() + ")" +
                    (reference.pairs_load < 1 ? printf_string("; pairs against their reference pairs' %.2f GB/s",
                                                              reference.pairs_gbps())
                                              : ""),
                reference.gbps() > 0 ? figure / reference.gbps() : 1, rule, Verdict::pass};
    if (!is(bisection.suspects, n)) {
      // A failed ring not bisected (the run was cut short), or one within noise.
      if (last_verdict[n] != Verdict::pass) check.verdict = Verdict::retest;
      out.nodes[n].checks.push_back(check);
      continue;
    }
    check.value += "; slow in its rings";
    const auto partner_of = [&](size_t l) {
      return static_cast<size_t>(in.links[l].a) == n ? out.links[l].hosts.second : out.links[l].hosts.first;
    };
    std::string with_sound, failed_link;
    if (const auto l = confirmation(n))
      with_sound = printf_string(", %.2f GB/s", out.links[*l].bandwidth_gbps) +
                   printf_string(" (%.2f of the median link)", out.links[*l].bandwidth_ratio) + " with " + partner_of(*l) +
                   ", known sound";
    for (size_t l = 0; l < in.links.size(); ++l)
      if (touches(in.links[l], n) && out.links[l].verdict == Verdict::fail && failed_link.empty()) failed_link = partner_of(l);
    // A node that failed beside it in a ring explains its slow rings.
    std::string explained_by;
    for (const RingTest& test : in.ring_tests)
      for (int c : confirmed)
        if (static_cast<size_t>(c) != n && is(test.nodes, n) && is(test.nodes, static_cast<size_t>(c)) &&
            judge_ring(test, reference, rules).first == Verdict::fail && explained_by.empty())
          explained_by = in.nodes[static_cast<size_t>(c)].inventory.host;
    const auto confirming = confirmation(n);
    if (is(confirmed, n)) {
      check.verdict = Verdict::fail;
      check.value += " and" + with_sound.substr(1);
    } else if (with_sound.empty()) {
      check.verdict = Verdict::retest;
      check.value += ", never measured with a node known sound";
    } else if (out.links[*confirming].verdict != Verdict::pass) {
      // Neither slow enough to fail nor sound there: nothing it explains can clear it.
      check.verdict = Verdict::retest;
      check.value += ", and to be retested" + with_sound;
    } else if (!explained_by.empty()) {
      check.value += ", sound" + with_sound + ": slow beside " + explained_by + ", which fails";
    } else if (!failed_link.empty()) {
      check.value += ", sound" + with_sound + ": its link with " + failed_link + " fails on its own";
    } else {
      check.verdict = Verdict::retest;
      check.value += ", sound" + with_sound + ": nothing measured explains its slow rings (noise?)";
    }
    out.nodes[n].checks.push_back(check);
  }
  for (size_t l = 0; l < in.links.size(); ++l) {
    LinkVerdict& link = out.links[l];
    if (link.verdict == Verdict::pass) continue;
    for (int c : confirmed)
      if (touches(in.links[l], static_cast<size_t>(c)) && link.verdict == Verdict::fail)
        link.cause = "node " + in.nodes[static_cast<size_t>(c)].inventory.host + ": slow in its rings and with a node known sound";
    if (link.cause.empty()) link.cause = "this link";
  }
}

// Every node answers every stage; one that went silent where the run ended
// is lost, unless its silent partner over a link may be the lost one instead.
void judge_silent_nodes(Acceptance& out, const CutShort& cut) {
  out.cut_short = cut;
  out.verdict = Verdict::fail;
  // Cut short before the inventory, the run knows no node to name.
  std::erase_if(out.cut_short->silent_nodes, [&](int n) { return n < 0 || static_cast<size_t>(n) >= out.nodes.size(); });
  for (const int n : out.cut_short->silent_nodes) {
    std::string partner;
    for (const auto& [a, b] : cut.silent_pairs)
      if (a == n || b == n) partner = out.nodes[static_cast<size_t>(a == n ? b : a)].host;
    out.nodes[static_cast<size_t>(n)].checks.push_back(
        {"answered", "no answer", "stage " + cut.stage + " (" + cut.why + ")",
         0, partner.empty() ? "every node answers every stage"
                            : "every node answers every stage; it and " + partner +
                                  " went silent measuring their link, and either may be the one lost",
         partner.empty() ? Verdict::fail : Verdict::retest});
  }
}

// Collectives: each group's peak busbw (the most over the sizes, as NVCRE
// ADR-021 judges) against the median of the groups' peaks for that
// collective, where 3 groups or more make a median worth comparing with. A
// group's figure is its nodes' (a slow node or link among them slows the
// group), so each of its nodes carries the check. Full scale has no peers:
// only a baseline or a threshold could judge it, and it is reported.
bool fails_network(const NodeVerdict& node) {
  return std::any_of(node.checks.begin(), node.checks.end(),
                     [](const Check& c) { return c.name == "network" && c.verdict == Verdict::fail; });
}

void judge_collectives(Acceptance& out, const Measurements& in, const Rules& rules) {
  // The check's name → its groups' indexes into out.collectives.
  std::map<std::string, std::vector<size_t>> groups_of;
  for (const CollectiveSweep& sweep : in.collectives) {
    CollectiveVerdict verdict;
    verdict.collective = sweep.collective;
    verdict.transport = sweep.transport;
    verdict.ranks = sweep.ranks;
    for (int n : sweep.nodes) verdict.hosts.push_back(in.nodes[static_cast<size_t>(n)].inventory.host);
    verdict.full_scale = sweep.nodes.size() == in.nodes.size();
    for (const CollectivePoint& point : sweep.points) {
      const CollectiveFigures figures = collective_figures(point, sweep.collective, sweep.ranks);
      if (figures.busbw_gbps > verdict.peak_busbw_gbps) {
        verdict.peak_busbw_gbps = figures.busbw_gbps;
        verdict.peak_bytes = point.bytes;
      }
      verdict.largest_cv = std::max(verdict.largest_cv, figures.cv);
    }
    if (!sweep.points.empty()) {
      const CollectiveFigures smallest = collective_figures(sweep.points.front(), sweep.collective, sweep.ranks);
      verdict.small_message_us = smallest.median_us;
      verdict.small_message_p99_us = smallest.p99_us;
    }
    if (verdict.full_scale) verdict.cause = "full scale has no peers to be judged against; its figures are reported";
    else groups_of[collective_check_name(sweep.transport, sweep.collective)].push_back(out.collectives.size());
    out.collectives.push_back(verdict);
  }
  for (const auto& [check_name, groups] : groups_of) {
    if (groups.size() < 3) {
      for (size_t g : groups)
        out.collectives[g].cause = std::to_string(groups.size()) + (groups.size() == 1 ? " group" : " groups") +
                                   ": a group is judged against the median of 3 groups or more";
      continue;
    }
    std::vector<double> peaks;
    for (size_t g : groups) peaks.push_back(out.collectives[g].peak_busbw_gbps);
    const Fleet fleet(peaks);
    for (size_t i = 0; i < groups.size(); ++i) {
      CollectiveVerdict& group = out.collectives[groups[i]];
      const auto [verdict, ratio] = fleet.judge(peaks[i], rules);
      group.verdict = verdict;
      group.ratio = ratio;
      // A node of the group that fails `network` explains its slow collectives; the others are cleared.
      std::string failing;
      for (int n : in.collectives[groups[i]].nodes)
        if (fails_network(out.nodes[static_cast<size_t>(n)])) failing += (failing.empty() ? "" : ", ") + out.nodes[static_cast<size_t>(n)].host;
      if (verdict != Verdict::pass)
        group.cause = failing.empty() ? "a node or link among the group's nodes" : "node " + failing + ", which fails network";
      const Check check{check_name,
                        printf_string("%.2f GB/s", peaks[i]) + " (peak busbw of its group of " +
                            std::to_string(group.hosts.size()) + " nodes, " + group.hosts.front() + " to " +
                            group.hosts.back() + ")",
                        printf_string("%.2f GB/s", fleet.median) + " (median of the " + std::to_string(groups.size()) +
                            " groups' peaks)",
                        ratio, rule_text(rules, "the median group"), verdict};
      for (int n : in.collectives[groups[i]].nodes) {
        NodeVerdict& node = out.nodes[static_cast<size_t>(n)];
        Check mine = check;
        if (verdict != Verdict::pass && !failing.empty() && !fails_network(node)) {
          mine.verdict = Verdict::pass;
          mine.value += "; slow beside " + failing + ", which fails network";
        }
        node.checks.push_back(mine);
      }
    }
  }
}

}  // namespace

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::pass: return "pass";
    case Verdict::retest: return "retest";
    case Verdict::fail: return "fail";
  }
  return "fail";
}

Acceptance judge(const Measurements& in, const Rules& rules) {
  Acceptance out;
  for (const NodeMeasurements& node : in.nodes) out.nodes.push_back({node.inventory.host, Verdict::pass, {}});
  judge_inventory(out, in, "cpu_model", [](const Inventory& i) { return i.cpu_model; });
  judge_inventory(out, in, "cpus", [](const Inventory& i) { return std::to_string(i.cpus); });
  // Memory in whole GiB: firmware and kernel reservations move MemTotal by megabytes between like nodes.
  judge_inventory(out, in, "memory_gib", [](const Inventory& i) { return std::to_string((i.memory_bytes + (1 << 29)) >> 30); });
  judge_inventory(out, in, "kernel", [](const Inventory& i) { return i.kernel; });
  judge_inventory(out, in, "mpi_library", [](const Inventory& i) { return i.mpi_library; });
  judge_inventory(out, in, "rankscope_version", [](const Inventory& i) { return i.rankscope_version; });
  judge_metric(out, in, rules, "compute", "GFLOP/s", &NodeMeasurements::gemm_gflops);
  judge_metric(out, in, rules, "memory", "GB/s", &NodeMeasurements::triad_gbps);
  const bool any_gpu = std::any_of(in.nodes.begin(), in.nodes.end(),
                                   [](const NodeMeasurements& node) { return node.inventory.gpus > 0; });
  if (any_gpu) {
    judge_inventory(out, in, "gpus", [](const Inventory& i) { return std::to_string(i.gpus); });
    judge_inventory(out, in, "gpu_model", [](const Inventory& i) { return i.gpu_model; });
    judge_inventory(out, in, "gpu_driver", [](const Inventory& i) { return i.gpu_driver; });
    judge_inventory(out, in, "cuda_version", [](const Inventory& i) { return i.cuda_version; });
    judge_inventory(out, in, "nccl_version", [](const Inventory& i) { return i.nccl_version; });
    judge_gpus(out, in, rules, "compute", "TFLOP/s", &GpuMeasurements::gemm_tflops, upper_quartile, "upper quartile of",
               "repeats");
    judge_gpus(out, in, rules, "memory", "GB/s", &GpuMeasurements::triad_gbps, upper_quartile, "upper quartile of",
               "repeats");
    judge_gpus(out, in, rules, "sustained", "TFLOP/s", &GpuMeasurements::sustained_tflops, held_figure,
               "median of the last half of", "one-second slices");
    judge_gpu_errors(out, in);
  }
  out.link_screen = in.link_screen;
  judge_each_link(out, in, rules);
  if (in.link_screen == LinkScreen::group_testing) judge_group_tests(out, in, rules);
  else judge_rows(out, in, rules);
  judge_collectives(out, in, rules);
  out.nccl_not_measured = in.nccl_not_measured;
  for (size_t i = 0; i < in.nodes.size(); ++i) out.nodes[i].checks.push_back(clock_check(in.nodes[i].clock, rules));
  const std::vector<Check> reference_job = reference_job_checks(in, rules);
  for (size_t i = 0; i < reference_job.size(); ++i) out.nodes[i].checks.push_back(reference_job[i]);
  out.reference_job = in.reference_job;
  if (in.cut_short) judge_silent_nodes(out, *in.cut_short);
  for (NodeVerdict& node : out.nodes) {
    for (const Check& check : node.checks) node.verdict = worse(node.verdict, check.verdict);
    if (node.verdict == Verdict::fail) out.verdict = Verdict::fail;
  }
  for (const LinkVerdict& link : out.links)
    if (link.verdict == Verdict::fail) out.verdict = Verdict::fail;
  for (const CollectiveVerdict& collective : out.collectives)
    if (collective.verdict == Verdict::fail) out.verdict = Verdict::fail;
  return out;
}

Retests retests_of(const Acceptance& so_far, const Measurements& measured) {
  Retests retests;
  const auto unpassed = [&](size_t node, std::string_view check, std::string_view rule) {
    for (const Check& c : so_far.nodes[node].checks)
      if ((c.name == check || c.name == rule) && c.verdict != Verdict::pass) return true;
    return false;
  };
  for (size_t n = 0; n < so_far.nodes.size(); ++n) {
    if (unpassed(n, "compute", "rule compute_gflops")) retests.compute.push_back(static_cast<int>(n));
    if (unpassed(n, "memory", "rule memory_gbps")) retests.memory.push_back(static_cast<int>(n));
  }
  if (so_far.link_screen == LinkScreen::all_pairs)
    for (size_t l = 0; l < so_far.links.size() && l < measured.links.size(); ++l)
      if (so_far.links[l].verdict != Verdict::pass) retests.links.emplace_back(measured.links[l].a, measured.links[l].b);
  return retests;
}

std::vector<std::vector<std::pair<int, int>>> pairing_rounds(int nodes, unsigned repeat) {
  std::vector<std::vector<std::pair<int, int>>> rounds;
  if (nodes < 2) return rounds;
  // The circle method: one seat fixed, the others rotating; an odd count gets a bye seat (-1).
  const int seats = nodes % 2 == 0 ? nodes : nodes + 1;
  std::vector<int> circle(static_cast<size_t>(seats));
  for (int i = 0; i < seats; ++i) circle[static_cast<size_t>(i)] = i < nodes ? i : -1;
  if (repeat > 0) {
    // Fisher-Yates on mt19937's numbers, which the standard fixes (its distributions it does not).
    std::mt19937 numbers(repeat);
    for (size_t i = circle.size() - 1; i > 0; --i) std::swap(circle[i], circle[numbers() % (i + 1)]);
  }
  for (int round = 0; round < seats - 1; ++round) {
    std::vector<std::pair<int, int>> pairs;
    for (int i = 0; i < seats / 2; ++i) {
      const int a = circle[static_cast<size_t>(i)], b = circle[static_cast<size_t>(seats - 1 - i)];
      if (a >= 0 && b >= 0) pairs.emplace_back(std::min(a, b), std::max(a, b));
    }
    rounds.push_back(pairs);
    std::rotate(circle.begin() + 1, circle.end() - 1, circle.end());
  }
  return rounds;
}

std::vector<std::vector<int>> node_groups(int nodes) {
  int width = 1;
  while (width * width < nodes) ++width;
  std::vector<std::vector<int>> groups;
  if (width >= nodes) return groups;
  for (int first = 0; first + 1 < nodes; first += width) {
    std::vector<int> group;
    for (int n = first; n < std::min(first + width, nodes); ++n) group.push_back(n);
    groups.push_back(group);
  }
  return groups;
}

}  // namespace rankscope::acceptance
