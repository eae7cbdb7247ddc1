// What capture windows cost on the hot path, in the recorder itself (no
// agent, no shard): Recorder::record for an event inside the window
// (copied into the thread's block), outside it (counted), outside and newer
// than eight past windows (the common case: one more compare), and outside
// but older than the past windows' end (a late GPU record: all eight looked
// at); and what each NVTX range
// edge pays to RangeWindows when nothing, a step selection or a named range
// steers. Figures: bench/results/long-jobs.md, "Long jobs: what windows cost".
//
// Run: build/bench/bench_windows --benchmark_repetitions=5
//        --benchmark_display_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "range_windows.h"
#include "recorder.h"

namespace {

using rankscope::Event;
using rankscope::EventKind;
using rankscope::agent::Block;
using rankscope::agent::RangeWindows;
using rankscope::agent::Recorder;

constexpr uint64_t kPoolBlocks = 64;
// The inside run hands its blocks back this often, its timer paused, as the
// writer thread would.
constexpr uint64_t kDrainEvery = 16384;

Event range_event(int64_t at) {
  Event e{};
  e.begin_ns = at;
  e.end_ns = at + 1;
  e.kind = EventKind::kNvtxRange;
  e.track = rankscope::agent::kThreadTrack;
  return e;
}

bool ready(Recorder& recorder, benchmark::State& state) {
  if (recorder.init(kPoolBlocks * sizeof(Block))) return true;
  state.SkipWithError("no memory for the pool");
  return false;
}

enum class Window : int64_t { kInside, kOutside, kNewerThanPastWindows, kAmongPastWindows };
constexpr const char* kWindowLabels[] = {"inside the window", "outside", "outside, newer than 8 past windows",
                                         "outside, among 8 past windows"};

void BM_Record(benchmark::State& state) {
  const auto window = static_cast<Window>(state.range(0));
  Recorder recorder;
  if (!ready(recorder, state)) return;
  if (window != Window::kInside) recorder.set_window(INT64_MAX, INT64_MAX);
  if (window == Window::kNewerThanPastWindows || window == Window::kAmongPastWindows) {
    // Eight windows of 1 ns, before every event or after them all.
    const int64_t first = window == Window::kNewerThanPastWindows ? -100 : int64_t{1} << 60;
    for (int64_t w = 0; w < int64_t{Recorder::kPastWindows}; ++w) recorder.open_window(first + 2 * w, first + 2 * w + 1);
    recorder.open_window(INT64_MAX, INT64_MAX);
  }
  Event e = range_event(0);
  uint64_t since_drain = 0;
  for (auto _ : state) {
    ++e.begin_ns;
    ++e.end_ns;
    recorder.record(e);
    if (++since_drain == kDrainEvery) {
      since_drain = 0;
      state.PauseTiming();
      recorder.drain([](std::span<Event> events) { benchmark::DoNotOptimize(events.data()); });
      state.ResumeTiming();
    }
  }
  const uint64_t outside = recorder.outside_window();
  if (window == Window::kInside ? outside != 0 : outside != static_cast<uint64_t>(state.iterations())) {
    state.SkipWithError("the window did not hold or keep out what it should");
  }
  state.SetLabel(kWindowLabels[state.range(0)]);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_Record)->DenseRange(0, 3);

enum class Steering : int64_t { kNothing, kStepsOtherRange, kStepsStepRange, kNamedRangeOther };
constexpr const char* kSteeringLabels[] = {"nothing steers", "--steps, another range", "--steps, a ProfilerStep#N range",
                                           "--capture-range nvtx:NAME, another range"};

// One push and one pop of a range, as the NVTX source reports them.
void BM_RangeEdges(benchmark::State& state) {
  const auto steering = static_cast<Steering>(state.range(0));
  Recorder recorder;
  if (!ready(recorder, state)) return;
  RangeWindows windows(recorder);
  const uint32_t step = recorder.strings().intern("ProfilerStep#12345");
  const uint32_t other = recorder.strings().intern("DistributedDataParallel.forward");
  const uint32_t wanted = recorder.strings().intern("capture");
  if (steering == Steering::kStepsOtherRange || steering == Steering::kStepsStepRange) {
    windows.steer_by_steps(*rankscope::parse_step_selection("100:109/1000"), "--steps 100:109/1000");
  }
  if (steering == Steering::kNamedRangeOther) windows.steer_by_range(wanted, RangeWindows::kAnyDomain, "nvtx:capture");
  const uint32_t name = steering == Steering::kStepsStepRange ? step : other;
  int64_t at = 0;
  for (auto _ : state) {
    windows.range_edge(name, 1, ++at, true);
    windows.range_edge(name, 1, ++at, false);
  }
  benchmark::DoNotOptimize(windows.windows_opened());
  state.SetLabel(kSteeringLabels[state.range(0)]);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_RangeEdges)->DenseRange(0, 3);

}  // namespace

BENCHMARK_MAIN();
