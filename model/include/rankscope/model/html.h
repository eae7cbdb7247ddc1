// The pieces of rankscope's self-contained HTML pages (`report --format html`,
// `accept --format html`): escaping, the page's frame and common style, and
// SVG plots drawn as text. Nothing is fetched and nothing is scripted, so a
// page opens the same from disk, as a mail attachment or on a login node
// without internet.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rankscope::html {

// Everything that comes from users or their machines (paths, hosts, names)
// goes through here. Control characters other than tab and newline are not
// allowed in HTML text; they become U+FFFD.
std::string escape(std::string_view text);

// `<!DOCTYPE html>` up to the opening <main>, with the common style and the
// page's own `style` rules; `title_html` is already escaped.
std::string page_start(std::string_view title_html, std::string_view style);
std::string page_end();

// SVG coordinates: one decimal is below a pixel's tenth, and keeps big pages small.
std::string coord(double value);

// The smallest of 1, 2, 5, 10, 20, 50, … at least `minimum`: label every k-th
// row or column so labels keep their distance however many there are.
int label_stride(double minimum);

// About `count` round steps from at or below `low` to at or above `high`: the
// first and last ticks are the axis's ends, so that every value is inside.
std::vector<double> nice_ticks(double low, double high, int count);

// Maps a value's interval onto pixels; log2 for byte sizes, which span decades.
struct Scale {
  double domain_low, domain_high, pixel_low, pixel_high;
  bool log2 = false;

  double operator()(double value) const;
};

// Every piece below appends to `out`; arguments named `html` are already
// escaped or made by the caller.
void write_note(std::string& out, std::string_view html, std::string_view id = {});
void write_svg_open(std::string& out, std::string_view id, double width, double height, std::string_view label);
void write_svg_close(std::string& out);
void write_text(std::string& out, double x, double y, std::string_view html, std::string_view attributes = {});
void write_line(std::string& out, double x1, double y1, double x2, double y2, std::string_view css_class);
void write_rect(std::string& out, double x, double y, double width, double height, std::string_view css_class,
                std::string_view title_html = {});

// A log2 axis of byte sizes along `y` (Scale with log2), a tick at powers of
// two, about seven labelled, and its title below.
void write_size_axis(std::string& out, const Scale& x, double y, std::string_view title);

}  // namespace rankscope::html
