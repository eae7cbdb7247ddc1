#!/usr/bin/env python3
"""The HTML report as headless Chromium renders it: after rendering, the DOM
holds the plots with their shapes, and the screenshot shows the heatmap's and
the bars' colours, not a blank page.

Usage: check_report_render.py WRITE_REPORT_PAGE WORK_DIR
Exits 77 (the test's skip code) when no Chromium is installed. Python's
standard library only, so that the test needs nothing beyond Chromium.
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
WINDOW = (1280, 1600)
# The page's colours (report_html.cpp's style): heatmap scale and overlap bars.
WAIT_PALETTE = ["ffffcc", "ffeda0", "fed976", "feb24c", "fd8d3c", "fc4e2a", "e31a1c", "bd0026", "800026"]
BAR_COLOUR = "4c78a8"
# (name, ranks, steps, whether the overlap bars fit in the window): a job that
# fits the page, and one whose heatmap has one-pixel rows and fills the window.
CASES = [("small", 8, 24, True), ("large", 1024, 50, False)]


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
    command = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
               "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile_dir}", *arguments]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    if result.returncode != 0:
        fail(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr[-2000:]}")
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


def check_dom(dom, ranks):
    parser = PlotShapes()
    parser.feed(dom)
    # (plot, shape, at least): a path per heatmap row, a bar per rank, a point per bucket and prediction.
    expected = [("wait-heatmap", "path", ranks), ("overlap-bars", "rect", ranks),
                ("bucket-plot", "circle", 6), ("bucket-prediction-plot", "circle", 7)]
    for plot, shape, least in expected:
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


def check_screenshot(path, bars_on_screen):
    width, height, colours = png_pixels(path)
    if (width, height) != WINDOW:
        fail(f"screenshot is {width}×{height}, the window {WINDOW[0]}×{WINDOW[1]}")
    shown = [c for c in WAIT_PALETTE if c in colours]
    print(f"  screenshot: {len(colours)} colours, {len(shown)} of the heatmap's 9")
    if len(colours) < 20:
        fail(f"the screenshot is (nearly) blank: {len(colours)} colours")
    if len(shown) < 5:
        fail(f"the heatmap's colours are not on screen: found {shown}")
    if bars_on_screen and BAR_COLOUR not in colours:
        fail("the overlap bars' colour is not on screen")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    write_page, work = sys.argv[1], sys.argv[2]
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: no Chromium found (Debian: apt-get install chromium, or scripts/setup-deps.sh as root; "
              "or set RANKSCOPE_CHROMIUM)")
        return SKIP
    os.makedirs(work, exist_ok=True)
    for name, ranks, steps, bars_on_screen in CASES:
        page = os.path.join(work, f"report_{name}.html")
        screenshot = os.path.join(work, f"report_{name}.png")
        subprocess.run([write_page, page, str(ranks), str(steps)], check=True)
        if os.path.exists(screenshot):
            os.remove(screenshot)
        print(f"{name}: {ranks} ranks × {steps} steps, {os.path.getsize(page)} bytes: {page}")
        url = "file://" + os.path.abspath(page)
        profile = os.path.join(work, "chromium-profile")
        check_dom(run_chromium(chromium, profile, "--dump-dom", url), ranks)
        run_chromium(chromium, profile, f"--screenshot={screenshot}", f"--window-size={WINDOW[0]},{WINDOW[1]}", url)
        if not os.path.exists(screenshot):
            fail(f"Chromium wrote no screenshot {screenshot}")
        check_screenshot(screenshot, bars_on_screen)
        print(f"  screenshot: {screenshot}")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
