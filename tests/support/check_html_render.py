#!/usr/bin/env python3
"""rankscope's HTML pages as headless Chromium renders them: after rendering,
the DOM holds the plots with their shapes, and the screenshot shows the
heatmap's and the bars' colours, not a blank page.

Usage: check_html_render.py report|accept WRITE_PAGE WORK_DIR
WRITE_PAGE writes a page of hand-built data: `WRITE_PAGE OUT.html ARGS...`,
with each case's ARGS below. Exits 77 (the test's skip code) when no
Chromium is installed. Python's standard library only, so that the test
needs nothing beyond Chromium.
"""
import collections
import html.parser
import os
import shutil
import struct
import subprocess
import sys
import zlib

SKIP = 77
Case = collections.namedtuple("Case", "name arguments shapes palette least_of_palette bar_colours window")
# Each page's cases: `shapes`, (plot, shape, at least) after rendering;
# `palette`, its heatmap's colours (the page's style), of which the screenshot
# of a `window` (width, height) shows `least_of_palette`; `bar_colours`,
# colours that must be on screen.
PAGES = {
    # A job that fits the page, and one whose heatmap has one-pixel rows and
    # fills the window: a path per heatmap row, a bar per rank, a point per
    # bucket and prediction (report_html.cpp). The window is tall enough for
    # the heatmap below the verdict and the GPU overview.
    "report": [
        Case(f"{ranks} ranks × {steps} steps", [str(ranks), str(steps)],
             [("wait-heatmap", "path", ranks), ("overlap-bars", "rect", ranks),
              ("bucket-plot", "circle", 6), ("bucket-prediction-plot", "circle", 7)],
             ["ffffcc", "ffeda0", "fed976", "feb24c", "fd8d3c", "fc4e2a", "e31a1c", "bd0026", "800026"], 5,
             bars_on_screen, (1280, 4000))
        for ranks, steps, bars_on_screen in [(8, 24, ["4c78a8"]), (1024, 50, [])]
    ],
    # A few nodes and a large fleet (write_accept_page.cpp): a cell for every
    # pair of nodes, a bar per node, a point per collective and size; the
    # typical link's colour and the failed one's, the passed and failed bars'
    # (acceptance/src/html.cpp), which at 64 nodes lie below the heatmap.
    "accept": [
        Case(f"{nodes} nodes", [str(nodes)],
             [("link-heatmap", "rect", nodes * nodes), ("compute-bars", "rect", nodes),
              ("memory-bars", "rect", nodes), ("busbw-curves", "circle", 26)],
             ["d1e5f0", "67001f"], 2, ["4c78a8", "d7301f"], (1280, 2200))
        for nodes in (4, 64)
    ] + [
        # Group testing: its rings and links as tables instead of the heatmap.
        Case("16 nodes, group testing", ["16", "groups"],
             [("compute-bars", "rect", 16), ("memory-bars", "rect", 16), ("busbw-curves", "circle", 26)],
             [], 0, ["4c78a8", "d7301f"], (1280, 2200))
    ],
}


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def find_chromium():
    for name in (os.environ.get("RANKSCOPE_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def run_chromium(chromium, profile_dir, *arguments):
    # --no-sandbox: tests run as root in CI, where Chromium's sandbox refuses to start.
    # The page's console goes to stderr, where anything it says fails the test.
    command = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
               "--disable-dev-shm-usage", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
               f"--user-data-dir={profile_dir}", *arguments]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    if result.returncode != 0:
        fail(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-2000:]}")
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    if console:
        fail("the page wrote to the console:\n" + "\n".join(console[:20]))
    return result.stdout


class PlotShapes(html.parser.HTMLParser):
    """Counts the elements inside each <svg>, by the svg's id."""

    def __init__(self):
        super().__init__()
        self.current = None
        self.shapes = {}

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            self.current = dict(attrs).get("id", "")
            self.shapes[self.current] = collections.Counter()
        elif self.current is not None:
            self.shapes[self.current][tag] += 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.current = None


def check_dom(dom, case):
    parser = PlotShapes()
    parser.feed(dom)
    for plot, shape, least in case.shapes:
        if plot not in parser.shapes:
            fail(f"no <svg id={plot}> in the rendered DOM")
        found = parser.shapes[plot][shape]
        if found < least:
            fail(f"{plot} has {found} <{shape}> after rendering, expected at least {least}")
        print(f"  {plot}: {dict(parser.shapes[plot])}")


def png_pixels(path):
    """(width, height, set of colours as hex) of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    position, compressed, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace != 0:
        fail(f"{path}: unexpected PNG layout (depth {depth}, colour type {colour_type}, interlace {interlace})")
    channels = 3 if colour_type == 2 else 4
    stride = width * channels
    raw = zlib.decompress(b"".join(compressed))
    previous = bytearray(stride)
    colours = set()
    for y in range(height):
        start = y * (stride + 1)
        kind, row = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        unfilter(kind, row, previous, channels)
        # Colours to the pixel (alpha is opaque in a screenshot); a set of row slices is fast.
        colours.update(row[x:x + 3].hex() for x in range(0, stride, channels))
        previous = row
    return width, height, colours


def unfilter(kind, row, previous, bpp):
    """Undoes a PNG row filter in place (PNG specification, section 9)."""
    if kind == 0:
        return
    if kind == 2:
        for i in range(len(row)):
            row[i] = (row[i] + previous[i]) & 0xFF
        return
    for i in range(len(row)):
        left = row[i - bpp] if i >= bpp else 0
        if kind == 1:
            row[i] = (row[i] + left) & 0xFF
        elif kind == 3:
            row[i] = (row[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            up, up_left = previous[i], previous[i - bpp] if i >= bpp else 0
            estimate = left + up - up_left
            distances = (abs(estimate - left), abs(estimate - up), abs(estimate - up_left))
            nearest = left if distances[0] <= distances[1] and distances[0] <= distances[2] else (
                up if distances[1] <= distances[2] else up_left)
            row[i] = (row[i] + nearest) & 0xFF
        else:
            fail(f"PNG filter type {kind} does not exist")


def check_screenshot(path, case):
    width, height, colours = png_pixels(path)
    if (width, height) != case.window:
        fail(f"screenshot is {width}×{height}, the window {case.window[0]}×{case.window[1]}")
    shown = [c for c in case.palette if c in colours]
    print(f"  screenshot: {len(colours)} colours, {len(shown)} of the heatmap's {len(case.palette)}")
    if len(colours) < 20:
        fail(f"the screenshot is (nearly) blank: {len(colours)} colours")
    if len(shown) < case.least_of_palette:
        fail(f"the heatmap's colours are not on screen: found {shown}")
    for colour in case.bar_colours:
        if colour not in colours:
            fail(f"the bars' colour #{colour} is not on screen")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in PAGES:
        print(__doc__, file=sys.stderr)
        return 2
    kind, write_page, work = sys.argv[1:]
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: no Chromium found (Debian: apt-get install chromium, or scripts/setup-deps.sh as root; "
              "or set RANKSCOPE_CHROMIUM)")
        return SKIP
    os.makedirs(work, exist_ok=True)
    for number, case in enumerate(PAGES[kind]):
        page = os.path.join(work, f"{kind}_{number}.html")
        screenshot = os.path.join(work, f"{kind}_{number}.png")
        subprocess.run([write_page, page, *case.arguments], check=True)
        if os.path.exists(screenshot):
            os.remove(screenshot)
        print(f"{kind}, {case.name}: {os.path.getsize(page)} bytes: {page}")
        url = "file://" + os.path.abspath(page)
        profile = os.path.join(work, "chromium-profile")
        check_dom(run_chromium(chromium, profile, "--dump-dom", url), case)
        run_chromium(chromium, profile, f"--screenshot={screenshot}", f"--window-size={case.window[0]},{case.window[1]}", url)
        if not os.path.exists(screenshot):
            fail(f"Chromium wrote no screenshot {screenshot}")
        check_screenshot(screenshot, case)
        print(f"  screenshot: {screenshot}")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
