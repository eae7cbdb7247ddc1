#include "rankscope/model/html.h"

#include <algorithm>
#include <cmath>

#include "rankscope/model/format.h"

namespace rankscope::html {
namespace {

// What every page shares; each page adds the classes of its own plots.
constexpr const char* kCommonStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#222;
background:#f6f6f4;margin:0}
main{max-width:1180px;margin:0 auto;padding:12px 24px 48px}
h1{font-size:22px;margin:10px 0 2px}
h2{font-size:17px;margin:30px 0 8px;padding-bottom:4px;border-bottom:1px solid #d8d8d8}
h3{font-size:14px;margin:16px 0 4px}
code{font-family:"DejaVu Sans Mono",monospace;font-size:13px;word-break:break-all}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 18px;margin:10px 0;background:#fff;
border:1px solid #e2e2e2;border-radius:4px;padding:10px 14px}
.facts dt{color:#666}
.facts dd{margin:0}
.alert{color:#b00020;font-weight:600}
pre.alert{white-space:pre-wrap}
.good{color:#2a7a2a;font-weight:600}
.note{color:#666;font-style:italic}
.caption{color:#555;font-size:13px;max-width:920px;margin:4px 0 10px}
.plot{overflow-x:auto;background:#fff;border:1px solid #e2e2e2;border-radius:4px;padding:6px;margin:8px 0}
.plot svg{display:block}
svg text{font-size:11px;fill:#333}
svg .axis-title{font-size:12px;fill:#555}
svg .marker{fill:#b00020;font-weight:600}
svg .grid{stroke:#e6e6e6;stroke-width:1}
svg .axis{stroke:#999;stroke-width:1}
.table-wrap{overflow-x:auto}
table{border-collapse:collapse;background:#fff;font-size:13px;margin:8px 0;border:1px solid #e2e2e2}
th,td{padding:3px 9px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{background:#efefed;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tbody tr:nth-child(even) td{background:#fafafa}
td.evidence{color:#444;padding-bottom:10px}
summary{cursor:pointer;color:#444;margin:6px 0}
)";

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      case '\t': case '\n': out += c; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += "\xEF\xBF\xBD";
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string page_start(std::string_view title_html, std::string_view style) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
         std::string(title_html) + "</title>\n<style>" + kCommonStyle + std::string(style) +
         "</style>\n</head>\n<body>\n<main>\n";
}

std::string page_end() { return "</main>\n</body>\n</html>\n"; }

std::string coord(double value) { return trimmed(value, 1); }

int label_stride(double minimum) {
  for (int magnitude = 1;; magnitude *= 10) {
    for (const int factor : {1, 2, 5}) {
      if (factor * magnitude >= minimum) return factor * magnitude;
    }
  }
}

std::vector<double> nice_ticks(double low, double high, int count) {
  if (!(high > low)) return {low};
  const double raw_step = (high - low) / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  double step = magnitude * 10;
  for (const double factor : {1.0, 2.0, 5.0}) {
    if (factor * magnitude >= raw_step) {
      step = factor * magnitude;
      break;
    }
  }
  std::vector<double> ticks;
  const double last = std::ceil(high / step - 1e-9);
  for (double i = std::floor(low / step + 1e-9); i <= last; ++i) ticks.push_back(i * step);
  return ticks;
}

double Scale::operator()(double value) const {
  const double low = log2 ? std::log2(domain_low) : domain_low;
  const double high = log2 ? std::log2(domain_high) : domain_high;
  const double at = log2 ? std::log2(std::max(value, domain_low)) : value;
  if (!(high > low)) return (pixel_low + pixel_high) / 2;
  return pixel_low + (at - low) / (high - low) * (pixel_high - pixel_low);
}

void write_note(std::string& out, std::string_view html, std::string_view id) {
  out += "<p class=\"note\"";
  if (!id.empty()) out += " id=\"" + std::string(id) + "\"";
  out += ">";
  out += html;
  out += "</p>\n";
}

void write_svg_open(std::string& out, std::string_view id, double width, double height, std::string_view label) {
  out += "<div class=\"plot\"><svg id=\"" + std::string(id) + "\" width=\"" + coord(width) + "\" height=\"" +
         coord(height) + "\" viewBox=\"0 0 " + coord(width) + " " + coord(height) + "\" role=\"img\" aria-label=\"" +
         std::string(label) + "\">\n";
}

void write_svg_close(std::string& out) { out += "</svg></div>\n"; }

void write_text(std::string& out, double x, double y, std::string_view html, std::string_view attributes) {
  out += "<text x=\"" + coord(x) + "\" y=\"" + coord(y) + "\"";
  if (!attributes.empty()) out += " " + std::string(attributes);
  out += ">";
  out += html;
  out += "</text>\n";
}

void write_line(std::string& out, double x1, double y1, double x2, double y2, std::string_view css_class) {
  out += "<line x1=\"" + coord(x1) + "\" y1=\"" + coord(y1) + "\" x2=\"" + coord(x2) + "\" y2=\"" + coord(y2) +
         "\" class=\"" + std::string(css_class) + "\"/>\n";
}

void write_rect(std::string& out, double x, double y, double width, double height, std::string_view css_class,
                std::string_view title_html) {
  out += "<rect x=\"" + coord(x) + "\" y=\"" + coord(y) + "\" width=\"" + coord(width) + "\" height=\"" +
         coord(height) + "\" class=\"" + std::string(css_class) + "\"";
  if (title_html.empty()) {
    out += "/>\n";
  } else {
    out += "><title>" + std::string(title_html) + "</title></rect>\n";
  }
}

void write_size_axis(std::string& out, const Scale& x, double y, std::string_view title) {
  const int low_exponent = static_cast<int>(std::ceil(std::log2(x.domain_low)));
  const int high_exponent = static_cast<int>(std::floor(std::log2(x.domain_high)));
  const int stride = std::max(1, (high_exponent - low_exponent + 7) / 7);
  write_line(out, x.pixel_low, y, x.pixel_high, y, "axis");
  for (int exponent = low_exponent; exponent <= high_exponent; ++exponent) {
    if (exponent % stride != 0) continue;
    const double bytes = std::ldexp(1.0, exponent);
    write_line(out, x(bytes), y, x(bytes), y + 4, "axis");
    write_text(out, x(bytes), y + 16, format_bytes(bytes), "text-anchor=\"middle\"");
  }
  write_text(out, (x.pixel_low + x.pixel_high) / 2, y + 34, title, "class=\"axis-title\" text-anchor=\"middle\"");
}

}  // namespace rankscope::html
