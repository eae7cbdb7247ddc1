// The acceptance run's outputs: one screen of text (failed items first) and JSON.
#include <algorithm>
#include <cstdio>
#include <set>

#include "fleet.h"
#include "rankscope/acceptance/collectives.h"
#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/summary.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/model/format.h"
#include "rankscope/model/text.h"
#include "rankscope/model/json.h"

namespace rankscope::acceptance {

std::string summary_text(const Acceptance& acceptance) {
  int failed_nodes = 0, failed_links = 0;
  for (const NodeVerdict& node : acceptance.nodes) failed_nodes += node.verdict == Verdict::fail ? 1 : 0;
  for (const LinkVerdict& link : acceptance.links) failed_links += link.verdict == Verdict::fail ? 1 : 0;
  std::string text = std::string("acceptance: ") + (acceptance.verdict == Verdict::pass ? "PASS" : "FAIL") + " (" +
                     std::to_string(acceptance.nodes.size() - static_cast<size_t>(failed_nodes)) + " of " +
                     std::to_string(acceptance.nodes.size()) + " nodes and " +
                     std::to_string(acceptance.links.size() - static_cast<size_t>(failed_links)) + " of " +
                     std::to_string(acceptance.links.size()) + " links accepted)\n";
  if (const auto& cut = acceptance.cut_short) {
    std::string silent;
    for (const int n : cut->silent_nodes) silent += (silent.empty() ? "" : ", ") + acceptance.nodes[static_cast<size_t>(n)].host;
    text += "run cut short in stage " + cut->stage + " (" + cut->why + "): " +
            (silent.empty() ? std::string("no node was known to be silent") : "no answer from " + silent) +
            "; judged on what was measured before\n";
  }
  text += "\nnodes:\n";
  for (const NodeVerdict* node : worst_first(acceptance.nodes)) {
    text += "  " + std::string(verdict_name(node->verdict)) + "  " + node->host;
    std::string figures;
    for (const Check& check : node->checks) {
      if (check.name == "compute" || check.name == "memory") figures += "  " + check.name + " " + check.value + " (" + printf_string("%.2f", check.ratio) + ")";
    }
    text += figures + "\n";
    std::string gpus;  // each GPU's GEMM and triad with their ratios, in its index's order
    for (const Check& check : node->checks) {
      if (!check.name.starts_with("gpu") || !(check.name.ends_with(".compute") || check.name.ends_with(".memory"))) continue;
      const bool compute = check.name.ends_with(".compute");
      gpus += (compute ? "  " + check.name.substr(0, check.name.find('.')) : std::string()) + " " +
              check.value.substr(0, check.value.find(" (")) + printf_string(" (%.2f)", check.ratio) + (compute ? "," : "");
    }
    if (!gpus.empty()) text += "      gpus:" + gpus + "\n";
    for (const Check& check : node->checks)
      if (check.verdict != Verdict::pass)
        text += "      " + std::string(verdict_name(check.verdict)) + " " + check.name + ": " + check.value + " against " +
                check.reference + "; " + check.rule + "\n";
  }
  if (acceptance.link_screen == LinkScreen::group_testing) {
    int rounds = 0;
    for (const RingVerdict& ring : acceptance.ring_tests) rounds = std::max(rounds, ring.round + 1);
    const size_t suspects = acceptance.suspects.size();
    text += "\ngroup testing (" + std::to_string(acceptance.ring_tests.size()) + " ring tests in " +
            std::to_string(rounds) + (rounds == 1 ? " round, " : " rounds, ") + std::to_string(suspects) +
            (suspects == 1 ? " suspect" : " suspects") + "; the slowest node of each ring, and its ratio to the reference ring: the first round's median, or the baseline's; "
            "a pair's to the reference pairs where those ran slower):\n";
    for (const RingVerdict* ring : worst_first(acceptance.ring_tests)) {
      if (ring->verdict == Verdict::pass && acceptance.ring_tests.size() > 8) continue;
      std::string hosts;
      for (const std::string& host : ring->hosts) hosts += (hosts.empty() ? "" : " ") + host;
      text += "  " + std::string(verdict_name(ring->verdict)) + "  round " + std::to_string(ring->round + 1) +
              (ring->pair ? " pair  " : "  ") + hosts + printf_string("  %.2f GB/s (%.2f)", ring->gbps, ring->ratio) + "\n";
    }
    if (acceptance.ring_tests.size() > 8) text += "  (passed rings not shown: --format json lists every ring)\n";
  }
  if (!acceptance.links.empty()) text += "\nlinks (bandwidth, latency; ratio to the median link):\n";
  for (const LinkVerdict* link : worst_first(acceptance.links)) {
    text += "  " + std::string(verdict_name(link->verdict)) + "  " + link->hosts.first + " - " + link->hosts.second +
            printf_string("  %.2f GB/s", link->bandwidth_gbps) + printf_string(" (%.2f)", link->bandwidth_ratio) +
            printf_string("  %.1f us", link->latency_us) + printf_string(" (%.2f)", link->latency_ratio) +
            (link->cause.empty() ? "" : "  " + link->cause) + "\n";
  }
  if (!acceptance.collectives.empty()) {
    text += "\ncollectives (peak busbw, at its size, and its ratio to the median group; median time at the smallest size):\n";
  }
  std::set<std::string> not_judged;  // why, once each
  for (const CollectiveVerdict* collective : worst_first(acceptance.collectives)) {
    std::string scope = collective->full_scale
                            ? "all " + std::to_string(collective->hosts.size()) + " nodes"
                            : "group " + collective->hosts.front() + "-" + collective->hosts.back() + " (" +
                                  std::to_string(collective->hosts.size()) + " nodes)";
    if (collective->transport != "mpi") scope += ", " + std::to_string(collective->ranks) + " GPUs";
    text += "  " + std::string(verdict_name(collective->verdict)) + "  " +
            printf_string("%-20s", collective_label(collective->transport, collective->collective).c_str()) + scope + printf_string("  %.2f GB/s", collective->peak_busbw_gbps) + " at " +
            format_bytes(static_cast<double>(collective->peak_bytes)) +
            (collective->ratio ? printf_string(" (%.2f)", *collective->ratio) : "") +
            printf_string("  %.1f us (p99 %.1f us)", collective->small_message_us, collective->small_message_p99_us) +
            (collective->verdict == Verdict::pass ? "" : "  " + collective->cause) + "\n";
    if (!collective->ratio) not_judged.insert(collective->cause);
  }
  for (const std::string& why : not_judged) text += "  not judged against peers: " + why + "\n";
  if (!acceptance.nccl_not_measured.empty()) text += "  nccl: not measured: " + acceptance.nccl_not_measured + "\n";
  return text + reference_job_text(acceptance.reference_job, acceptance.nodes);
}

std::string summary_json(const Acceptance& acceptance, const Measurements& measurements) {
  JsonWriter json;
  json.begin_object().key("verdict").value(acceptance.verdict == Verdict::pass ? "pass" : "fail");
  json.key("cut_short");
  if (const auto& cut = acceptance.cut_short) {
    json.begin_object().key("stage").value(cut->stage).key("why").value(cut->why).key("silent_hosts").begin_array();
    for (const int n : cut->silent_nodes) json.value(acceptance.nodes[static_cast<size_t>(n)].host);
    json.end_array().end_object();
  } else {
    json.null();
  }
  json.key("nccl_not_measured").value(acceptance.nccl_not_measured);
  json.key("nodes").begin_array();
  for (size_t i = 0; i < acceptance.nodes.size(); ++i) {
    const NodeVerdict& node = acceptance.nodes[i];
    const NodeMeasurements& measured = measurements.nodes[i];
    json.begin_object().key("host").value(node.host).key("verdict").value(verdict_name(node.verdict));
    const Inventory& inventory = measured.inventory;
    json.key("inventory").begin_object().key("cpu_model").value(inventory.cpu_model).key("cpus").value(inventory.cpus)
        .key("memory_bytes").value(inventory.memory_bytes).key("kernel").value(inventory.kernel)
        .key("mpi_library").value(inventory.mpi_library).key("rankscope_version").value(inventory.rankscope_version)
        .key("gpus").value(inventory.gpus).key("gpu_model").value(inventory.gpu_model)
        .key("gpu_driver").value(inventory.gpu_driver).key("cuda_version").value(inventory.cuda_version)
        .key("nccl_version").value(inventory.nccl_version).key("gpu_unavailable").value(inventory.gpu_unavailable)
        .end_object();
    json.key("checks").begin_array();
    for (const Check& check : node.checks)
      json.begin_object().key("name").value(check.name).key("verdict").value(verdict_name(check.verdict))
          .key("value").value(check.value).key("reference").value(check.reference).key("ratio").value(check.ratio)
          .key("rule").value(check.rule).end_object();
    json.end_array();
    json.key("gemm_gflops").begin_array();
    for (double v : measured.gemm_gflops) json.value(v);
    json.end_array().key("triad_gbps").begin_array();
    for (double v : measured.triad_gbps) json.value(v);
    json.end_array().key("gpus").begin_array();
    for (const GpuMeasurements& gpu : measured.gpus) {
      json.begin_object().key("index").value(gpu.index).key("model").value(gpu.model).key("uuid").value(gpu.uuid)
          .key("memory_bytes").value(gpu.memory_bytes).key("gemm_tflops").begin_array();
      for (double v : gpu.gemm_tflops) json.value(v);
      json.end_array().key("triad_gbps").begin_array();
      for (double v : gpu.triad_gbps) json.value(v);
      json.end_array().key("sustained_tflops").begin_array();
      for (double v : gpu.sustained_tflops) json.value(v);
      json.end_array().key("clocks_held_back").value(gpu.clocks_held_back).end_object();
    }
    json.end_array().key("gpu_error").value(measured.gpu_error).key("nccl_error").value(measured.nccl_error);
    json.key("clock").begin_object().key("offset_ns").value(measured.clock.offset_ns)
        .key("bound_ns").value(measured.clock.bound_ns).key("error").value(measured.clock.error).end_object();
    json.end_object();
  }
  json.end_array().key("link_screen").value(link_screen_name(acceptance.link_screen)).key("ring_tests").begin_array();
  for (size_t t = 0; t < acceptance.ring_tests.size(); ++t) {
    const RingVerdict& ring = acceptance.ring_tests[t];
    json.begin_object().key("round").value(ring.round + 1).key("pair").value(ring.pair).key("hosts").begin_array();
    for (const std::string& host : ring.hosts) json.value(host);
    json.end_array().key("verdict").value(verdict_name(ring.verdict)).key("gbps").value(ring.gbps)
        .key("ratio").value(ring.ratio).key("node_gbps").begin_array();
    for (double v : measurements.ring_tests[t].gbps) json.value(v);
    json.end_array().end_object();
  }
  json.end_array().key("suspects").begin_array();
  for (const std::string& host : acceptance.suspects) json.value(host);
  json.end_array().key("links").begin_array();
  for (size_t l = 0; l < acceptance.links.size(); ++l) {
    const LinkVerdict& link = acceptance.links[l];
    json.begin_object().key("hosts").begin_array().value(link.hosts.first).value(link.hosts.second).end_array()
        .key("verdict").value(verdict_name(link.verdict)).key("bandwidth_gbps").value(link.bandwidth_gbps)
        .key("latency_us").value(link.latency_us).key("bandwidth_ratio").value(link.bandwidth_ratio)
        .key("latency_ratio").value(link.latency_ratio).key("cause").value(link.cause);
    json.key("bandwidth_gbps_repeats").begin_array();
    for (double v : measurements.links[l].bandwidth_gbps) json.value(v);
    json.end_array().key("latency_us_repeats").begin_array();
    for (double v : measurements.links[l].latency_us) json.value(v);
    json.end_array().end_object();
  }
  json.end_array().key("collectives").begin_array();
  for (size_t c = 0; c < acceptance.collectives.size(); ++c) {
    const CollectiveVerdict& collective = acceptance.collectives[c];
    const CollectiveSweep& sweep = measurements.collectives[c];
    json.begin_object().key("collective").value(collective.collective)
        .key("transport").value(collective.transport).key("ranks").value(collective.ranks)
        .key("scope").value(collective.full_scale ? "full" : "group").key("hosts").begin_array();
    for (const std::string& host : collective.hosts) json.value(host);
    json.end_array().key("verdict").value(verdict_name(collective.verdict))
        .key("peak_busbw_gbps").value(collective.peak_busbw_gbps).key("peak_bytes").value(collective.peak_bytes)
        .figure("ratio", collective.ratio.value_or(0), collective.ratio ? "" : collective.cause)
        .key("small_message_us").value(collective.small_message_us)
        .key("small_message_p99_us").value(collective.small_message_p99_us)
        .key("largest_cv").value(collective.largest_cv).key("cause").value(collective.cause);
    json.key("points").begin_array();
    for (const CollectivePoint& point : sweep.points) {
      const CollectiveFigures figures = collective_figures(point, sweep.collective, sweep.ranks);
      json.begin_object().key("bytes").value(point.bytes).key("time_us").value(figures.median_us)
          .key("algbw_gbps").value(figures.algbw_gbps).key("busbw_gbps").value(figures.busbw_gbps)
          .key("p99_us").value(figures.p99_us).key("cv").value(figures.cv).end_object();
    }
    json.end_array().end_object();
  }
  json.end_array().key("reference_job");
  write_reference_job_json(json, acceptance.reference_job, acceptance.nodes);
  json.end_object();
  return json.str() + "\n";
}

}  // namespace rankscope::acceptance
