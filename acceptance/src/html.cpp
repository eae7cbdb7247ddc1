// accept --format html (docs/accept.md, "The HTML page"): one self-contained
// page drawn with model/html.h's pieces. What failed comes first with its
// evidence, then the pictures that show where: the links as a heatmap, each
// node's compute and memory as bars, the collectives' bus bandwidth by size,
// and the inventory. Hovering shows each cell's and bar's figures (SVG
// titles), which needs no script.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "fleet.h"
#include "rankscope/acceptance/collectives.h"
#include "rankscope/acceptance/fleet_rules.h"
#include "rankscope/acceptance/link_screen.h"
#include "rankscope/acceptance/measurements.h"
#include "rankscope/acceptance/summary.h"
#include "rankscope/acceptance/verdict.h"
#include "rankscope/model/format.h"
#include "rankscope/model/html.h"
#include "rankscope/model/text.h"

namespace rankscope::acceptance {
namespace {

using namespace html;

constexpr const char* kStyle = R"(
.verdict{font-size:30px;font-weight:700;margin:6px 0 2px}
.verdict-fail{color:#b00020;font-weight:600}.verdict-retest{color:#a35f00;font-weight:600}.verdict-pass{color:#2a7a2a}
td.differs{color:#b00020;font-weight:600}
.r0{fill:#4393c3}.r1{fill:#d1e5f0}.r2{fill:#fddbc7}.r3{fill:#f4a582}.r4{fill:#d6604d}.r5{fill:#b2182b}.r6{fill:#67001f}
.diagonal{fill:#f0f0f0}.no-link{fill:#cfcfcf}
.failed-mark{stroke:#111;stroke-width:2;fill:none;pointer-events:none}
.retest-mark{stroke:#111;stroke-width:1.5;fill:none;pointer-events:none}
svg .cell-value{font-size:11px;fill:#222;pointer-events:none}
.failed-mark.on-dark,.retest-mark.on-dark{stroke:#fff}svg .cell-value.on-dark{fill:#fff}
.bar-pass{fill:#4c78a8}.bar-retest{fill:#f2a93b}.bar-fail{fill:#d7301f}
.fail-line{stroke:#b00020;stroke-width:1.5;stroke-dasharray:5 3}
.median-line{stroke:#222;stroke-width:1;stroke-dasharray:4 3}
svg .fail-label{fill:#b00020;font-weight:600}
.c0{stroke:#4c78a8;fill:#4c78a8}.c1{stroke:#f58518;fill:#f58518}.c2{stroke:#54a24b;fill:#54a24b}
.c3{stroke:#e45756;fill:#e45756}.c4{stroke:#72b7b2;fill:#72b7b2}.c5{stroke:#b279a2;fill:#b279a2}
.curve{fill:none;stroke-width:2}
)";

// ------------------------------------------------------------- figures ---

std::string ratio_text(double ratio) { return printf_string("%.2f", ratio); }

std::string verdict_span(Verdict verdict) {
  return "<span class=\"verdict-" + std::string(verdict_name(verdict)) + "\">" + verdict_name(verdict) + "</span>";
}

const Check* find_check(const NodeVerdict& node, std::string_view name) {
  for (const Check& check : node.checks) {
    if (check.name == name) return &check;
  }
  return nullptr;
}

template <typename Item>
int count_verdict(const std::vector<Item>& items, Verdict verdict) {
  return static_cast<int>(std::count_if(items.begin(), items.end(), [&](const Item& item) { return item.verdict == verdict; }));
}

// Host names label rows and columns: long ones are cut (at a character, not
// inside one), the whole name stays in the tooltips and tables.
constexpr size_t kLabelCharacters = 20;
constexpr double kLabelCharacterWidth = 6.3;  // pixels of an 11 px label's character, about

size_t characters(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string host_label(const std::string& host) {
  size_t seen = 0;
  for (size_t at = 0; at < host.size(); ++at) {
    if ((host[at] & 0xC0) != 0x80 && seen++ == kLabelCharacters) return escape(host.substr(0, at)) + "…";
  }
  return escape(host);
}

// Pixels the longest of the labels needs.
double label_width(const Measurements& measurements) {
  size_t longest = 0;
  for (const NodeMeasurements& node : measurements.nodes) {
    longest = std::max(longest, std::min(characters(node.inventory.host), kLabelCharacters + 1));
  }
  return static_cast<double>(longest) * kLabelCharacterWidth + 8;
}

// ---------------------------------------------------------------- header ---

std::string accepted_text(int total, int failed, int retest, const char* items) {
  return std::to_string(total - failed) + " of " + std::to_string(total) + " " + items + " accepted (" +
         std::to_string(failed) + " failed, " + std::to_string(retest) + " to retest)";
}

void write_header(const Acceptance& acceptance, const Measurements& measurements, const Rules& rules, std::string& out) {
  const bool passed = acceptance.verdict != Verdict::fail;
  out += "<header id=\"summary\">\n<h1>rankscope acceptance</h1>\n";
  out += std::string("<p class=\"verdict ") + (passed ? "good" : "alert") + "\" id=\"verdict\">" +
         (passed ? "PASS" : "FAIL") + "</p>\n<dl class=\"facts\">\n";
  const int nodes = static_cast<int>(acceptance.nodes.size()), links = static_cast<int>(acceptance.links.size());
  out += "<dt>Nodes</dt><dd>" +
         accepted_text(nodes, count_verdict(acceptance.nodes, Verdict::fail),
                       count_verdict(acceptance.nodes, Verdict::retest), "nodes") + "</dd>\n";
  out += "<dt>Links</dt><dd>" +
         (links == 0 ? std::string("none: one node")
                     : accepted_text(links, count_verdict(acceptance.links, Verdict::fail),
                                     count_verdict(acceptance.links, Verdict::retest), "links")) + "</dd>\n";
  out += "<dt>Collectives</dt><dd>" +
         (measurements.collectives.empty() ? std::string("none measured")
                                           : std::to_string(measurements.collectives.size()) + " swept") + "</dd>\n";
  out += "<dt>Rules</dt><dd>" +
         printf_string("a figure fails below %.2f of the fleet's median and beyond %.0f robust deviations of the "
                       "fleet; it is to be retested below %.2f within them, or below %.2f beyond them",
                       rules.fail_below, rules.robust_z, rules.fail_below, rules.retest_below) + "</dd>\n";
  out += "</dl>\n</header>\n";
}

// -------------------------------------------------------------- problems ---

void write_problem_row(std::string& out, const std::string& item_html, const std::string& check, Verdict verdict,
                       const std::string& value_html, const std::string& reference_html, const std::string& ratio,
                       const std::string& rule_html) {
  out += "<tr><td>" + item_html + "</td><td>" + check + "</td><td>" + verdict_span(verdict) + "</td><td>" +
         value_html + "</td><td>" + reference_html + "</td><td class=\"num\">" + ratio + "</td><td>" + rule_html +
         "</td></tr>\n";
}

void write_problems(const Acceptance& acceptance, const Rules& rules, std::string& out) {
  out += "<section id=\"problem-section\">\n<h2>Failed and to retest</h2>\n";
  std::string rows;
  for (const Verdict verdict : {Verdict::fail, Verdict::retest}) {
    for (const NodeVerdict& node : acceptance.nodes) {
      for (const Check& check : node.checks) {
        if (check.verdict != verdict) continue;
        // An inventory field is the same or not: it has no ratio.
        const bool inventory = check.name.starts_with("inventory.");
        write_problem_row(rows, escape(node.host), check.name, verdict, escape(check.value), escape(check.reference),
                          inventory ? "—" : ratio_text(check.ratio), escape(check.rule));
      }
    }
    for (const LinkVerdict& link : acceptance.links) {
      if (link.verdict != verdict) continue;
      // The median link, from the link's figure and its ratio to it (latency's ratio is median / this).
      const std::string median_bandwidth =
          link.bandwidth_ratio > 0 ? printf_string("%.2f GB/s", link.bandwidth_gbps / link.bandwidth_ratio) : "—";
      write_problem_row(
          rows, escape(link.hosts.first) + " – " + escape(link.hosts.second), "link", verdict,
          printf_string("%.2f GB/s, %.1f µs", link.bandwidth_gbps, link.latency_us),
          "median link: " + median_bandwidth + printf_string(", %.1f µs", link.latency_us * link.latency_ratio),
          ratio_text(link.bandwidth_ratio) + ", " + ratio_text(link.latency_ratio),
          escape(link.cause) +
              (link.cause == "this link"
                   ? printf_string(": its bandwidth or latency below %.2f of the median link's and beyond the "
                                   "fleet's noise fails, within it is retested", rules.fail_below)
                   : std::string(": the node fails network")));
    }
  }
  if (rows.empty()) {
    write_note(out, "Nothing failed and nothing is to be retested.", "problem-note");
  } else {
    out += "<div class=\"table-wrap\"><table id=\"problem-table\">\n<thead><tr><th>node or link</th><th>check</th>"
           "<th>verdict</th><th>value</th><th>reference</th><th class=\"num\">ratio</th><th>rule</th></tr></thead>\n"
           "<tbody>\n" + rows + "</tbody></table></div>\n"
           "<p class=\"caption\">A ratio is the figure over its reference, lower when worse; a link's are of its "
           "bandwidth and of its latency (the median link's latency over its own).</p>\n";
  }
  out += "</section>\n";
}

// --------------------------------------------------------- link heatmap ---

// Colour bins of a link's bandwidth over the median link's, best first: the
// edges of the fail and retest rules are edges here too.
constexpr std::array<double, 6> kRatioEdges = {1.1, 0.95, 0.9, 0.8, 0.5, 0.2};
constexpr std::array<const char*, 7> kRatioBinNames = {"1.1 and more", "0.95 – 1.1", "0.9 – 0.95", "0.8 – 0.9",
                                                       "0.5 – 0.8",    "0.2 – 0.5",  "below 0.2"};

int ratio_bin(double ratio) {
  int bin = 0;
  while (bin < static_cast<int>(kRatioEdges.size()) && ratio < kRatioEdges[static_cast<size_t>(bin)]) ++bin;
  return bin;
}

// The darkest and the bluest bins carry white marks and numbers.
bool dark_bin(int bin) { return bin == 0 || bin >= 4; }

std::string link_title(const LinkVerdict& link) {
  std::string title = escape(link.hosts.first) + " – " + escape(link.hosts.second) + ": " +
                      printf_string("%.2f GB/s, %.2f of the median link; %.1f µs, %.2f; ", link.bandwidth_gbps,
                                    link.bandwidth_ratio, link.latency_us, link.latency_ratio) +
                      verdict_name(link.verdict);
  if (!link.cause.empty()) title += ": " + escape(link.cause);
  return title;
}

void write_link_heatmap(const Acceptance& acceptance, const Measurements& measurements, std::string& out) {
  const size_t nodes = measurements.nodes.size();
  // Which link joins each pair of nodes, both ways round.
  std::vector<int> link_at(nodes * nodes, -1);
  for (size_t l = 0; l < measurements.links.size() && l < acceptance.links.size(); ++l) {
    const size_t a = static_cast<size_t>(measurements.links[l].a), b = static_cast<size_t>(measurements.links[l].b);
    if (a >= nodes || b >= nodes) continue;
    link_at[a * nodes + b] = link_at[b * nodes + a] = static_cast<int>(l);
  }

  // Cells shrink to keep the matrix about 640 pixels wide; at a few nodes
  // they are large enough to hold their ratio.
  const double cell = std::clamp(std::floor(640.0 / static_cast<double>(nodes)), 8.0, 48.0);
  const double labels = label_width(measurements);
  const double left = labels + 10, top = labels + 10, legend_width = 190;
  const double grid = cell * static_cast<double>(nodes);
  const double legend_x = left + grid + 24;
  // Below the bins' legend, the two marks'.
  const double height = std::max(top + grid, top + 24.0 * static_cast<double>(kRatioBinNames.size() + 2)) + 16;
  write_svg_open(out, "link-heatmap", legend_x + legend_width, height, "bandwidth of every link, as a ratio to the median link");

  out += "<g shape-rendering=\"crispEdges\">\n";
  std::string marks;
  for (size_t row = 0; row < nodes; ++row) {
    for (size_t column = 0; column < nodes; ++column) {
      const double x = left + static_cast<double>(column) * cell, y = top + static_cast<double>(row) * cell;
      const int l = link_at[row * nodes + column];
      if (row == column) {
        write_rect(out, x, y, cell - 1, cell - 1, "cell diagonal");
        continue;
      }
      if (l < 0) {
        write_rect(out, x, y, cell - 1, cell - 1, "cell no-link",
                   escape(measurements.nodes[row].inventory.host) + " – " +
                       escape(measurements.nodes[column].inventory.host) + ": not measured");
        continue;
      }
      const LinkVerdict& link = acceptance.links[static_cast<size_t>(l)];
      const int bin = ratio_bin(link.bandwidth_ratio);
      write_rect(out, x, y, cell - 1, cell - 1, "cell r" + std::to_string(bin), link_title(link));
      const std::string on_dark = dark_bin(bin) ? " on-dark" : "";
      const double inset = std::max(1.5, cell / 5), size = cell - 1 - 2 * inset;
      const std::string at = std::to_string(row) + "," + std::to_string(column);
      if (link.verdict == Verdict::fail) {
        marks += "<path class=\"failed-mark" + on_dark + "\" data-cell=\"" + at + "\" d=\"M" + coord(x + inset) + " " +
                 coord(y + inset) + "l" + coord(size) + " " + coord(size) + "M" + coord(x + inset + size) + " " +
                 coord(y + inset) + "l-" + coord(size) + " " + coord(size) + "\"/>\n";
      } else if (link.verdict == Verdict::retest) {
        marks += "<circle class=\"retest-mark" + on_dark + "\" data-cell=\"" + at + "\" cx=\"" +
                 coord(x + (cell - 1) / 2) + "\" cy=\"" + coord(y + (cell - 1) / 2) + "\" r=\"" + coord(size / 2) +
                 "\"/>\n";
      }
      // Cells large enough hold their ratio, where no mark covers them.
      if (cell >= 36 && link.verdict == Verdict::pass) {
        write_text(marks, x + (cell - 1) / 2, y + (cell - 1) / 2 + 4, ratio_text(link.bandwidth_ratio),
                   "class=\"cell-value" + on_dark + "\" text-anchor=\"middle\"");
      }
    }
  }
  out += "</g>\n" + marks;

  const int stride = label_stride(13.0 / cell);
  for (size_t i = 0; i < nodes; i += static_cast<size_t>(stride)) {
    const double middle = static_cast<double>(i) * cell + (cell - 1) / 2;
    const std::string label = host_label(measurements.nodes[i].inventory.host);
    write_text(out, left - 6, top + middle + 4, label, "text-anchor=\"end\"");
    const double x = left + middle + 4, y = top - 6;
    write_text(out, x, y, label, "transform=\"rotate(-90 " + coord(x) + " " + coord(y) + ")\"");
  }

  // Legend: the colour bins, then the marks.
  write_text(out, legend_x, top - 8, "bandwidth / median link", "class=\"axis-title\"");
  for (size_t bin = 0; bin < kRatioBinNames.size(); ++bin) {
    const double y = top + 24.0 * static_cast<double>(bin);
    write_rect(out, legend_x, y, 16, 16, "r" + std::to_string(bin));
    write_text(out, legend_x + 22, y + 12, kRatioBinNames[bin]);
  }
  const double marks_y = top + 24.0 * static_cast<double>(kRatioBinNames.size()) + 8;
  out += "<path class=\"failed-mark\" d=\"M" + coord(legend_x + 2) + " " + coord(marks_y + 2) + "l12 12M" +
         coord(legend_x + 14) + " " + coord(marks_y + 2) + "l-12 12\"/>\n";
  write_text(out, legend_x + 22, marks_y + 12, "failed link");
  out += "<circle class=\"retest-mark\" cx=\"" + coord(legend_x + 8) + "\" cy=\"" + coord(marks_y + 32) +
         "\" r=\"5\"/>\n";
  write_text(out, legend_x + 22, marks_y + 36, "to retest");
  write_svg_close(out);
}

// Group testing's rings, worst first, then in the order measured.
void write_ring_table(const Acceptance& acceptance, std::string& out) {
  out += "<div class=\"table-wrap\"><table id=\"ring-table\">\n<thead><tr><th class=\"num\">round</th><th>nodes, "
         "in ring order</th><th>verdict</th><th class=\"num\">slowest node</th><th class=\"num\">ratio</th></tr>"
         "</thead>\n<tbody>\n";
  for (const RingVerdict* ring : worst_first(acceptance.ring_tests)) {
    std::string hosts;
    for (const std::string& host : ring->hosts) hosts += (hosts.empty() ? "" : " → ") + escape(host);
    out += "<tr><td class=\"num\">" + std::to_string(ring->round + 1) + (ring->pair ? " (pair)" : "") + "</td><td>" +
           hosts + "</td><td>" +
           verdict_span(ring->verdict) + "</td><td class=\"num\">" + format_bandwidth(ring->gbps) +
           "</td><td class=\"num\">" + ratio_text(ring->ratio) + "</td></tr>\n";
  }
  out += "</tbody></table></div>\n<p class=\"caption\">Group testing: in each ring every node sends to the next "
         "and receives from the one before, at once. A ring is as fast as its slowest node, judged against the "
         "first round's median ring (or the baseline's); a failed ring is split in two and each half tested in the next round, down to "
         "single nodes. Then pairs: each such node with a node known sound, the two ends of a link that joined "
         "the halves of a failed ring whose halves passed, and pairs of sound nodes, each judged as a ring and "
         "measured as a link. Where those pairs of sound nodes ran slower than the rings (a load of the moment), "
         "a pair is judged against them too: one slow against the rings alone is to be retested.</p>\n";
}

// Group testing's pairs as links, worst first.
void write_measured_links(const Acceptance& acceptance, std::string& out) {
  out += "<div class=\"table-wrap\"><table id=\"link-table\">\n<thead><tr><th>link</th><th>verdict</th>"
         "<th class=\"num\">bandwidth</th><th class=\"num\">latency</th><th class=\"num\">ratios</th><th>cause</th>"
         "</tr></thead>\n<tbody>\n";
  for (const LinkVerdict* link : worst_first(acceptance.links)) {
    out += "<tr><td>" + escape(link->hosts.first) + " – " + escape(link->hosts.second) + "</td><td>" +
           verdict_span(link->verdict) + "</td><td class=\"num\">" + format_bandwidth(link->bandwidth_gbps) +
           "</td><td class=\"num\">" + printf_string("%.1f µs", link->latency_us) + "</td><td class=\"num\">" +
           ratio_text(link->bandwidth_ratio) + ", " + ratio_text(link->latency_ratio) + "</td><td>" + escape(link->cause) +
           "</td></tr>\n";
  }
  out += "</tbody></table></div>\n<p class=\"caption\">The pairs group testing measured as links: bandwidth (the "
         "slower direction, the upper quartile of its repeats) and latency, with their ratios to the median of these links. Each takes "
         "the verdict of its ring of two.</p>\n";
}

void write_link_section(const Acceptance& acceptance, const Measurements& measurements, std::string& out) {
  out += "<section id=\"link-section\">\n<h2>Links</h2>\n";
  if (!acceptance.ring_tests.empty()) write_ring_table(acceptance, out);
  if (measurements.links.empty()) {
    write_note(out, acceptance.ring_tests.empty() ? "No links: one node has no link to measure."
                                                  : "No link measured: no two nodes were known sound.",
               "link-note");
  } else if (acceptance.link_screen == LinkScreen::group_testing) {
    // A few links among many nodes: a nodes × nodes matrix would be all but empty, and huge at scale.
    write_measured_links(acceptance, out);
  } else {
    write_link_heatmap(acceptance, measurements, out);
    out += "<p class=\"caption\">Each cell is the link between its row's node and its column's, coloured by its "
           "bandwidth (the slower direction, the upper quartile of its repeats) over the median link's. Hover over a cell for its "
           "bandwidth and latency. A row of dark cells is one node's NIC, cable or switch port; a single dark "
           "cell, the link itself.</p>\n";
  }
  out += "</section>\n";
}

// ------------------------------------------------------------ node bars ---

void write_node_bars(const Acceptance& acceptance, const Measurements& measurements, const Rules& rules,
                     std::string_view check_name, std::string_view id, std::string_view what, std::string& out) {
  const size_t nodes = acceptance.nodes.size();
  double highest = 1.2;
  for (const NodeVerdict& node : acceptance.nodes) {
    if (const Check* check = find_check(node, check_name)) highest = std::max(highest, check->ratio);
  }
  const double pitch = std::clamp(std::floor(720.0 / static_cast<double>(nodes)), 6.0, 56.0);
  const double gap = std::max(1.0, std::floor(pitch / 5));
  const double left = 56, top = 30, plot_height = 180, right = 110;
  const double bottom = label_width(measurements) + 30;
  const double plot_width = pitch * static_cast<double>(nodes);
  const std::vector<double> ticks = nice_ticks(0, highest, 4);
  const Scale y{0, ticks.back(), top + plot_height, top};
  write_svg_open(out, id, std::max(left + plot_width + right, 420.0), top + plot_height + bottom,
                 std::string(what) + " of each node, as a ratio to the fleet median");
  write_text(out, left, 16, std::string(what) + " / fleet median", "class=\"axis-title\"");
  for (const double tick : ticks) {
    write_line(out, left, y(tick), left + plot_width, y(tick), "grid");
    write_text(out, left - 6, y(tick) + 4, trimmed(tick, 2), "text-anchor=\"end\"");
  }
  for (size_t i = 0; i < nodes; ++i) {
    const NodeVerdict& node = acceptance.nodes[i];
    const Check* check = find_check(node, check_name);
    if (check == nullptr) continue;
    const double ratio = std::max(0.0, check->ratio);
    write_rect(out, left + static_cast<double>(i) * pitch + gap / 2, y(ratio), pitch - gap, y(0) - y(ratio),
               "bar-" + std::string(verdict_name(check->verdict)),
               escape(node.host) + ": " + escape(check->value) + ", " + ratio_text(check->ratio) + " of " +
                   escape(check->reference) + "; " + verdict_name(check->verdict));
  }
  write_line(out, left, y(1), left + plot_width, y(1), "median-line");
  write_text(out, left + plot_width + 6, y(1) + 4, "median");
  write_line(out, left, y(rules.fail_below), left + plot_width, y(rules.fail_below), "fail-line");
  write_text(out, left + plot_width + 6, y(rules.fail_below) + 4, "fail below " + trimmed(rules.fail_below, 2),
             "class=\"fail-label\"");
  write_line(out, left, y(0), left + plot_width, y(0), "axis");
  const int stride = label_stride(13.0 / pitch);
  for (size_t i = 0; i < nodes; i += static_cast<size_t>(stride)) {
    const double x = left + (static_cast<double>(i) + 0.5) * pitch + 4, label_y = y(0) + 8;
    write_text(out, x, label_y, host_label(acceptance.nodes[i].host),
               "text-anchor=\"end\" transform=\"rotate(-90 " + coord(x) + " " + coord(label_y) + ")\"");
  }
  write_svg_close(out);
}

void write_node_section(const Acceptance& acceptance, const Measurements& measurements, const Rules& rules,
                        std::string& out) {
  out += "<section id=\"node-section\">\n<h2>Compute and memory</h2>\n";
  if (acceptance.nodes.empty()) {
    write_note(out, "No nodes were measured.", "node-note");
    out += "</section>\n";
    return;
  }
  write_node_bars(acceptance, measurements, rules, "compute", "compute-bars", "compute (GEMM GFLOP/s)", out);
  write_node_bars(acceptance, measurements, rules, "memory", "memory-bars", "memory (triad GB/s)", out);
  out += "<p class=\"caption\">Each node's figure (the upper quartile of its repeats) over the fleet's median: double-precision GEMM on all its "
         "CPUs, and the STREAM triad. Bars are red where the node fails, orange where it is to be retested; hover "
         "over a bar for its figures.</p>\n</section>\n";
}

// ---------------------------------------------------------- collectives ---

constexpr int kCurveColours = 6;  // .c0 … .c5

std::string sweep_name(const CollectiveSweep& sweep) {
  return escape(collective_label(sweep.transport, sweep.collective)) + ", " + std::to_string(sweep.nodes.size()) + " nodes" +
         (sweep.transport == "mpi" ? "" : " (" + std::to_string(sweep.ranks) + " GPUs)");
}

void write_busbw_curves(const Measurements& measurements, std::string& out) {
  double smallest = INFINITY, largest = 0, fastest = 0;
  for (const CollectiveSweep& sweep : measurements.collectives) {
    for (const CollectivePoint& point : sweep.points) {
      const double bytes = std::max(1.0, static_cast<double>(point.bytes));
      smallest = std::min(smallest, bytes);
      largest = std::max(largest, bytes);
      fastest = std::max(fastest, collective_figures(point, sweep.collective, sweep.ranks).busbw_gbps);
    }
  }
  if (!(largest > 0)) smallest = largest = 1;
  // Half a power of two of margin on each side, and at least two powers of two shown.
  double low = smallest / std::sqrt(2.0), high = largest * std::sqrt(2.0);
  if (high < low * 4) {
    const double centre = std::sqrt(low * high);
    low = centre / 2;
    high = centre * 2;
  }
  const double left = 64, top = 20, plot_width = 640, plot_height = 240, right = 220, bottom = 46;
  const Scale x{low, high, left, left + plot_width, true};
  const std::vector<double> ticks = nice_ticks(0, fastest > 0 ? fastest : 1, 5);
  const Scale y{0, ticks.back(), top + plot_height, top};
  write_svg_open(out, "busbw-curves", left + plot_width + right, top + plot_height + bottom,
                 "bus bandwidth of each collective by message size");
  for (const double tick : ticks) {
    write_line(out, left, y(tick), left + plot_width, y(tick), "grid");
    write_text(out, left - 6, y(tick) + 4, significant(tick), "text-anchor=\"end\"");
  }
  write_line(out, left, top, left, top + plot_height, "axis");
  write_text(out, 14, top + plot_height / 2, "bus bandwidth, GB/s",
             "class=\"axis-title\" text-anchor=\"middle\" transform=\"rotate(-90 14 " + coord(top + plot_height / 2) + ")\"");
  write_size_axis(out, x, top + plot_height, "message size");

  for (size_t s = 0; s < measurements.collectives.size(); ++s) {
    const CollectiveSweep& sweep = measurements.collectives[s];
    const std::string colour = "c" + std::to_string(static_cast<int>(s) % kCurveColours);
    std::string path, points;
    for (const CollectivePoint& point : sweep.points) {
      const CollectiveFigures figures = collective_figures(point, sweep.collective, sweep.ranks);
      if (figures.median_us <= 0) continue;  // no iteration timed
      const double cx = x(std::max(1.0, static_cast<double>(point.bytes))), cy = y(figures.busbw_gbps);
      path += (path.empty() ? "M" : "L") + coord(cx) + " " + coord(cy);
      points += "<circle cx=\"" + coord(cx) + "\" cy=\"" + coord(cy) + "\" r=\"3\" class=\"point " + colour +
                "\"><title>" + sweep_name(sweep) + ", " + format_bytes(static_cast<double>(point.bytes)) +
                ": busbw " + format_bandwidth(figures.busbw_gbps) + " (algbw " + format_bandwidth(figures.algbw_gbps) +
                "), median " + format_duration(figures.median_us * 1e3) + ", p99 " +
                format_duration(figures.p99_us * 1e3) + ", CV " + format_percent(100 * figures.cv) +
                "</title></circle>\n";
    }
    out += "<path class=\"" + colour + " curve\" d=\"" + path + "\"/>\n" + points;
    const double legend_y = top + 8 + 20.0 * static_cast<double>(s);
    write_line(out, left + plot_width + 16, legend_y, left + plot_width + 40, legend_y, colour + " curve");
    write_text(out, left + plot_width + 46, legend_y + 4, sweep_name(sweep));
  }
  write_svg_close(out);
}

void write_collective_table(const Measurements& measurements, std::string& out) {
  out += "<div class=\"table-wrap\"><table id=\"collective-table\">\n<thead><tr><th>collective</th>"
         "<th class=\"num\">nodes</th><th class=\"num\">sizes</th><th class=\"num\">highest bus bandwidth</th>"
         "<th class=\"num\">at</th></tr></thead>\n<tbody>\n";
  for (const CollectiveSweep& sweep : measurements.collectives) {
    double best = 0;
    size_t best_bytes = 0;
    for (const CollectivePoint& point : sweep.points) {
      const double busbw = collective_figures(point, sweep.collective, sweep.ranks).busbw_gbps;
      if (busbw > best) {
        best = busbw;
        best_bytes = point.bytes;
      }
    }
    const std::string sizes =
        sweep.points.empty() ? std::string("none")
                             : format_bytes(static_cast<double>(sweep.points.front().bytes)) + " – " +
                                   format_bytes(static_cast<double>(sweep.points.back().bytes)) + " (" +
                                   std::to_string(sweep.points.size()) + ")";
    out += "<tr><td>" + escape(collective_label(sweep.transport, sweep.collective)) + "</td><td class=\"num\">" +
           std::to_string(sweep.nodes.size()) + (sweep.transport == "mpi" ? "" : " (" + std::to_string(sweep.ranks) + " GPUs)") +
           "</td><td class=\"num\">" + sizes + "</td><td class=\"num\">" +
           (best > 0 ? format_bandwidth(best) : std::string("—")) + "</td><td class=\"num\">" +
           (best > 0 ? format_bytes(static_cast<double>(best_bytes)) : std::string("—")) + "</td></tr>\n";
  }
  out += "</tbody></table></div>\n";
}

void write_collective_section(const Measurements& measurements, std::string& out) {
  out += "<section id=\"collective-section\">\n<h2>Collectives</h2>\n";
  if (measurements.collectives.empty()) {
    write_note(out, "No collectives measured.", "collective-note");
  } else {
    write_busbw_curves(measurements, out);
    out += "<p class=\"caption\">Bus bandwidth as nccl-tests counts it (the median iteration's algorithm bandwidth "
           "times the collective's factor), so that every collective reflects the same bottleneck. Hover over a "
           "point for its algorithm bandwidth, median and p99 iteration, and spread.</p>\n";
    write_collective_table(measurements, out);
  }
  if (!measurements.nccl_not_measured.empty()) {
    write_note(out, "NCCL's collectives between the GPUs were not measured: " + escape(measurements.nccl_not_measured) + ".",
               "nccl-note");
  }
  out += "</section>\n";
}

// ----------------------------------------------------------------- GPUs ---

// One row per GPU, worst verdict first; nothing on a fleet without GPUs.
void write_gpu_section(const Acceptance& acceptance, const Measurements& measurements, std::string& out) {
  struct Row {
    size_t node;
    const GpuMeasurements* gpu;
    const Check *compute, *memory, *sustained;
    Verdict verdict;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < acceptance.nodes.size() && i < measurements.nodes.size(); ++i) {
    for (const GpuMeasurements& gpu : measurements.nodes[i].gpus) {
      const std::string prefix = "gpu" + std::to_string(gpu.index) + ".";
      const Check* compute = find_check(acceptance.nodes[i], prefix + "compute");
      const Check* memory = find_check(acceptance.nodes[i], prefix + "memory");
      const Check* sustained = find_check(acceptance.nodes[i], prefix + "sustained");
      Verdict verdict = Verdict::pass;
      for (const Check* check : {compute, memory, sustained})
        if (check) verdict = worse(verdict, check->verdict);
      rows.push_back({i, &gpu, compute, memory, sustained, verdict});
    }
  }
  std::string errors;
  for (const NodeVerdict& node : acceptance.nodes)
    for (const char* name : {"gpu.measure", "collectives.nccl"})
      if (const Check* check = find_check(node, name))
        errors += "<li>" + escape(node.host) + ": " + escape(check->value) + "</li>\n";
  if (rows.empty() && errors.empty()) return;
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return static_cast<int>(a.verdict) > static_cast<int>(b.verdict); });
  out += "<section id=\"gpu-section\">\n<h2>GPUs</h2>\n";
  if (!errors.empty()) out += "<p>GPUs not measured, or not in NCCL's collectives:</p>\n<ul id=\"gpu-errors\">\n" + errors + "</ul>\n";
  out += "<div class=\"table-wrap\"><table id=\"gpu-table\">\n<thead><tr><th>host</th><th class=\"num\">GPU</th>"
         "<th>verdict</th><th>model</th><th>UUID</th><th class=\"num\">memory</th><th class=\"num\">bf16 GEMM</th>"
         "<th class=\"num\">triad</th><th class=\"num\">held GEMM</th><th>clocks held back by</th></tr></thead>\n<tbody>\n";
  const auto figure = [](const Check* check) {
    return check ? escape(check->value.substr(0, check->value.find(" ("))) + " (" + ratio_text(check->ratio) + ")"
                 : std::string("—");
  };
  for (const Row& row : rows) {
    out += "<tr><td>" + escape(acceptance.nodes[row.node].host) + "</td><td class=\"num\">" +
           std::to_string(row.gpu->index) + "</td><td>" + verdict_span(row.verdict) + "</td><td>" +
           escape(row.gpu->model) + "</td><td>" + escape(row.gpu->uuid) + "</td><td class=\"num\">" +
           format_bytes(static_cast<double>(row.gpu->memory_bytes)) + "</td><td class=\"num\">" + figure(row.compute) +
           "</td><td class=\"num\">" + figure(row.memory) + "</td><td class=\"num\">" + figure(row.sustained) +
           "</td><td>" + escape(row.gpu->clocks_held_back) + "</td></tr>\n";
  }
  out += "</tbody></table></div>\n<p class=\"caption\">Each GPU's bf16 GEMM through cuBLAS and STREAM triad over "
         "device memory (the upper quartile of its repeats), and the GEMM held on every GPU of its node at once (the "
         "median of the last half of its one-second slices), each with its ratio to the median over every GPU of "
         "the fleet; and what NVML said held its clocks back as the held GEMM ended.</p>\n</section>\n";
}

// ------------------------------------------------------------ inventory ---

void write_inventory(const Acceptance& acceptance, const Measurements& measurements, std::string& out) {
  out += "<section id=\"inventory-section\">\n<h2>Nodes</h2>\n";
  // Long tables start folded so that they do not bury the page.
  constexpr size_t kOpenUpTo = 32;
  out += printf_string("<details%s><summary>every node, %zu in all</summary>\n",
                       acceptance.nodes.size() <= kOpenUpTo ? " open" : "", acceptance.nodes.size());
  out += "<div class=\"table-wrap\"><table id=\"inventory-table\">\n<thead><tr><th>host</th><th>verdict</th>"
         "<th class=\"num\">compute</th><th class=\"num\">memory</th><th class=\"num\">network</th><th>CPU model</th>"
         "<th class=\"num\">CPUs</th><th class=\"num\">memory</th><th>kernel</th><th>MPI library</th>"
         "<th>rankscope</th></tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < acceptance.nodes.size() && i < measurements.nodes.size(); ++i) {
    const NodeVerdict& node = acceptance.nodes[i];
    const Inventory& inventory = measurements.nodes[i].inventory;
    const auto figure = [&](std::string_view name) {
      const Check* check = find_check(node, name);
      return check ? escape(check->value) + " (" + ratio_text(check->ratio) + ")" : std::string("—");
    };
    const Check* network = find_check(node, "network");
    // A field that differs from most nodes' is marked, with what most have.
    const auto field = [&](std::string_view name, const std::string& shown_html, const char* css_class) {
      const Check* check = find_check(node, name);
      std::string classes = css_class;
      if (check && check->verdict != Verdict::pass) classes += std::string(classes.empty() ? "" : " ") + "differs";
      std::string cell = "<td";
      if (!classes.empty()) cell += " class=\"" + classes + "\"";
      if (check && check->verdict != Verdict::pass) cell += " title=\"most nodes: " + escape(check->reference) + "\"";
      return cell + ">" + shown_html + "</td>";
    };
    out += "<tr><td>" + escape(node.host) + "</td><td>" + verdict_span(node.verdict) + "</td><td class=\"num\">" +
           figure("compute") + "</td><td class=\"num\">" + figure("memory") + "</td><td class=\"num\">" +
           (network ? ratio_text(network->ratio) : std::string("—")) + "</td>" +
           field("inventory.cpu_model", escape(inventory.cpu_model), "") +
           field("inventory.cpus", std::to_string(inventory.cpus), "num") +
           field("inventory.memory_gib", format_bytes(static_cast<double>(inventory.memory_bytes)), "num") +
           field("inventory.kernel", escape(inventory.kernel), "") +
           field("inventory.mpi_library", escape(inventory.mpi_library), "") +
           field("inventory.rankscope_version", escape(inventory.rankscope_version), "") + "</tr>\n";
  }
  out += "</tbody></table></div>\n</details>\n<p class=\"caption\">Compute and memory with their ratio to the "
         "fleet median; network, the median ratio of the node's links to that of the links between the other "
         "nodes (3 nodes or more). A field in red differs from the value most nodes have.</p>\n</section>\n";
}

}  // namespace

std::string summary_html(const Acceptance& acceptance, const Measurements& measurements, const Rules& rules) {
  std::string out = page_start(std::string("rankscope acceptance: ") +
                                   (acceptance.verdict == Verdict::fail ? "FAIL" : "PASS") + ", " +
                                   std::to_string(acceptance.nodes.size()) + " nodes",
                               kStyle);
  write_header(acceptance, measurements, rules, out);
  write_problems(acceptance, rules, out);
  write_link_section(acceptance, measurements, out);
  write_node_section(acceptance, measurements, rules, out);
  write_gpu_section(acceptance, measurements, out);
  write_collective_section(measurements, out);
  write_inventory(acceptance, measurements, out);
  out += page_end();
  return out;
}

}  // namespace rankscope::acceptance
