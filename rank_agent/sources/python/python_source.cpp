// Python capture: the entry points rankscope's hook in the interpreter calls
// through ctypes (rankscope/rank_agent/python_hook.h; the hook itself is
// hook/rankscope_hook, beside this file). The hook knows PyTorch; this side only
// records what it is told, keeps the ranges open now for a hang's state, and
// says at the end what a Python process did not give.
//
// Events: host ranges (steps, data loading, forward, backward, optimizer)
// are kNvtxRange on the calling thread's track, in the default domain;
// collectives kTorchCollective on their process group's track; waits
// kTorchWait on the waiting thread's track.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "capture_source.h"
#include "dynamic_symbols.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/event.h"
#include "rankscope/model/hash.h"
#include "rankscope/rank_agent/python_hook.h"

namespace rankscope::agent {
namespace {

bool capturing() { return rankscope_agent_capturing(kCapturePython); }

Event host_event(EventKind kind, int64_t begin, int64_t end, uint32_t name_id, uint16_t track) {
  Event e{};
  e.begin_ns = begin;
  e.end_ns = end;
  e.kind = kind;
  e.name_id = name_id == kNoName ? 0 : name_id;
  e.track = track;
  e.peer = kNoPeer;
  return e;
}

// The hook's ranges open now: steps and phases, a handful at a time. A slot
// is claimed by its `taken` flag; its words are written under its lock,
// for the writer thread to read whole.
struct OpenSlot {
  std::atomic<bool> taken{false};
  SequenceLock lock;
  std::atomic<int64_t> begin{0};
  std::atomic<uint32_t> name_id{0};
  std::atomic<uint32_t> track{0};
};
// Ranges not recorded because every slot was taken.
std::atomic<uint64_t> g_ranges_lost{0};
constexpr int32_t kOpenSlots = 64;
OpenSlot g_open[kOpenSlots];

std::atomic<bool> g_attached{false};
std::atomic<uint32_t> g_hooked{0};
std::atomic<uint64_t> g_hook_ns{0};

class PythonSource final : public CaptureSource {
 public:
  uint32_t bit() const override { return kCapturePython; }
  bool start(const AgentSettings&, std::string&) override {
    // Asked now, not at the end: a crash inside dlopen ends the process
    // with the loader's lock held. An interpreter's own executable calls
    // Python's main (_Py_UnixMain in Python 3.7, Py_Main before), defined
    // there or in libpython. A program that only embeds Python (LAMMPS,
    // through liblammps) has libpython loaded too, and never promised the
    // hook a run.
    in_python_ = program_names_symbol({"Py_BytesMain", "_Py_UnixMain", "Py_Main"});
    return true;
  }

  void stop() override {
    if (g_attached.load(std::memory_order_relaxed)) {
      rankscope_agent_add_counter(std::string(counter::kPythonHookAttached).c_str(), 1);
      rankscope_agent_add_counter(std::string(counter::kCostPythonHookNs).c_str(), g_hook_ns.load());
      rankscope_agent_add_counter(std::string(counter::kPythonTorchHooked).c_str(), g_hooked.load());
      if (const uint64_t lost = g_ranges_lost.load(); lost > 0) {
        rankscope_agent_add_counter(std::string(counter::kPythonRangesLost).c_str(), lost);
      }
      // Every rank of a job runs the same program: one line says it for all.
      if (g_hooked.load(std::memory_order_relaxed) == 0 && rankscope_agent_rank() == 0) {
        rankscope_python_say(
            "the Python program never imported torch: the Python hook, which captures torch's steps, data loading, "
            "phases and torch.distributed collectives, captured nothing");
      }
      return;
    }
    // A Python interpreter the hook never ran in: it ignored PYTHONPATH, or
    // the hook's folder was taken off it.
    if (!in_python_) return;
    rankscope_agent_add_counter(std::string(counter::kPythonHookNotRun).c_str(), 1);
    rankscope_python_say(
        "the Python hook did not run in this Python process (python -I or -E ignores PYTHONPATH, where "
        "rankscope puts it, and -S imports no sitecustomize; or the program changed PYTHONPATH): its steps, "
        "data loading, phases and torch.distributed collectives were not captured");
  }

  void add_open_events(int64_t now, std::vector<Event>& out) const override {
    for (const OpenSlot& slot : g_open) {
      if (!slot.taken.load(std::memory_order_acquire)) continue;
      int64_t begin = 0;
      uint32_t name_id = 0, track = 0;
      slot.lock.read([&] {
        begin = slot.begin.load(std::memory_order_relaxed);
        name_id = slot.name_id.load(std::memory_order_relaxed);
        track = slot.track.load(std::memory_order_relaxed);
      });
      if (begin == 0) continue;  // claimed, not yet written
      Event e = host_event(EventKind::kNvtxRange, begin, now, name_id, static_cast<uint16_t>(track));
      e.flags = kFlagIncomplete;
      out.push_back(e);
    }
  }

 private:
  bool in_python_ = false;  // the process is a Python interpreter
};

}  // namespace

CaptureSource& python_capture_source() {
  static PythonSource source;
  return source;
}

}  // namespace rankscope::agent

using rankscope::Event;
using rankscope::EventKind;
namespace agent_ns = rankscope::agent;

int rankscope_python_attach() {
  if (!agent_ns::capturing()) return 0;
  agent_ns::g_attached.store(true, std::memory_order_relaxed);
  return 1;
}

void rankscope_python_hooked(uint32_t hooked) {
  agent_ns::g_hooked.store(hooked | rankscope::counter::kHookedTorchImported, std::memory_order_relaxed);
}

uint32_t rankscope_python_thread_track() { return rankscope_agent_thread_track(); }

int64_t rankscope_python_now() { return rankscope_agent_now(); }

uint32_t rankscope_python_name(const char* text) {
  return text ? rankscope_agent_intern(text, std::strlen(text)) : agent_ns::kNoName;
}

uint32_t rankscope_python_enum(const char* type, const char* name) {
  if (!type || !name) return 0;
  const std::string_view type_name(type), wanted(name);
  if (type_name == "capture") return agent_ns::parse_capture_list(wanted);
  if (type_name == "hooked") {
    namespace counter = rankscope::counter;
    constexpr std::pair<std::string_view, uint32_t> kParts[] = {{"steps", counter::kHookedSteps},
                                                                {"data_loading", counter::kHookedDataLoading},
                                                                {"phases", counter::kHookedPhases},
                                                                {"collectives", counter::kHookedCollectives}};
    for (const auto& [part, bit] : kParts) {
      if (part == wanted) return bit;
    }
    return 0;
  }
  if (type_name == "op") {
    for (int i = 0; i < rankscope::kCommOpCount; ++i) {
      if (rankscope::comm_op_name(static_cast<rankscope::CommOp>(i)) == wanted) return static_cast<uint32_t>(i);
    }
  } else if (type_name == "datatype") {
    for (int i = 0; i < rankscope::kDataTypeCount; ++i) {
      if (rankscope::data_type_name(static_cast<rankscope::DataType>(i)) == wanted) return static_cast<uint32_t>(i);
    }
  }
  return 0;
}

int32_t rankscope_python_begin(uint32_t name_id, int64_t begin_ns) {
  if (!agent_ns::capturing()) return -1;
  if (begin_ns < 0) begin_ns = rankscope_agent_now();
  for (int32_t i = 0; i < agent_ns::kOpenSlots; ++i) {
    agent_ns::OpenSlot& slot = agent_ns::g_open[i];
    bool expected = false;
    if (slot.taken.load(std::memory_order_relaxed) ||
        !slot.taken.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      continue;
    }
    const uint32_t track = rankscope_agent_thread_track();
    slot.lock.write([&] {
      slot.begin.store(begin_ns, std::memory_order_relaxed);
      slot.name_id.store(name_id, std::memory_order_relaxed);
      slot.track.store(track, std::memory_order_relaxed);
    });
    // A step that begins opens a --steps window at this instant; its end, recorded, will close it.
    rankscope_agent_range_edge(name_id, 0, begin_ns, true);
    return i;
  }
  agent_ns::g_ranges_lost.fetch_add(1, std::memory_order_relaxed);
  return -1;
}

int64_t rankscope_python_end(int32_t slot) {
  if (slot < 0 || slot >= agent_ns::kOpenSlots) return 0;
  agent_ns::OpenSlot& open = agent_ns::g_open[slot];
  // Only the thread that took the slot writes it.
  const int64_t begin = open.begin.load(std::memory_order_relaxed);
  const uint32_t name_id = open.name_id.load(std::memory_order_relaxed);
  const auto track = static_cast<uint16_t>(open.track.load(std::memory_order_relaxed));
  open.lock.write([&] { open.begin.store(0, std::memory_order_relaxed); });
  open.taken.store(false, std::memory_order_release);
  if (begin == 0) return 0;
  const int64_t end = rankscope_agent_now();
  if (!agent_ns::capturing()) return end;
  const Event e = agent_ns::host_event(EventKind::kNvtxRange, begin, end, name_id, track);
  rankscope_agent_record(&e);
  rankscope_agent_range_edge(name_id, 0, end, false);
  return end;
}

uint32_t rankscope_python_group(const char* group_name, const char* description, uint64_t* hash) {
  if (!group_name || !description || !hash) return agent_ns::kNoName;
  *hash = rankscope::process_group_hash(group_name);
  return rankscope_agent_track(rankscope::TrackType::kProcessGroup, *hash, -1, description);
}

namespace {

// A collective's event of `kind` on `track`; nothing for values no event can hold.
void record_collective(EventKind kind, uint16_t track, uint64_t group_hash, uint32_t name_id, uint32_t op,
                       uint64_t seq, uint64_t bytes, uint32_t datatype, int32_t root, int64_t begin_ns,
                       int64_t end_ns) {
  if (!agent_ns::capturing() || op >= rankscope::kCommOpCount || datatype >= rankscope::kDataTypeCount) return;
  Event e = agent_ns::host_event(kind, begin_ns, end_ns, name_id, track);
  e.comm_hash = group_hash;
  e.op = static_cast<rankscope::CommOp>(op);
  e.seq = seq;
  e.bytes = bytes;
  e.datatype = static_cast<rankscope::DataType>(datatype);
  e.peer = root;
  rankscope_agent_record(&e);
}

}  // namespace

void rankscope_python_collective(uint32_t group_track, uint64_t group_hash, uint32_t name_id, uint32_t op,
                                 uint64_t seq, uint64_t bytes, uint32_t datatype, int32_t root, int64_t begin_ns,
                                 int completed) {
  record_collective(EventKind::kTorchCollective, static_cast<uint16_t>(group_track), group_hash, name_id, op, seq,
                    bytes, datatype, root, begin_ns, completed ? std::max(begin_ns, rankscope_agent_now()) : begin_ns);
}

void rankscope_python_enqueue(uint64_t group_hash, uint32_t name_id, uint32_t op, uint64_t seq, uint64_t bytes,
                              uint32_t datatype, int32_t root, int64_t begin_ns) {
  record_collective(EventKind::kNcclCollectiveEnqueue, agent_ns::kThreadTrack, group_hash, name_id, op, seq, bytes,
                    datatype, root, begin_ns, rankscope_agent_now());
}

void rankscope_python_wait(uint32_t name_id, uint64_t group_hash, uint32_t op, uint64_t seq, int64_t begin_ns) {
  if (!agent_ns::capturing() || op >= rankscope::kCommOpCount) return;
  Event e = agent_ns::host_event(EventKind::kTorchWait, begin_ns, std::max(begin_ns, rankscope_agent_now()), name_id,
                                 agent_ns::kThreadTrack);
  e.comm_hash = group_hash;
  e.op = static_cast<rankscope::CommOp>(op);
  e.seq = seq;
  rankscope_agent_record(&e);
}

void rankscope_python_count(const char* counter, uint64_t value) {
  // Only the hook's own counters: a name from Python must not reach another source's.
  if (counter && std::string_view(counter).starts_with(rankscope::counter::kPythonPrefix)) {
    rankscope_agent_add_counter(counter, value);
  }
}

void rankscope_python_cost(uint64_t hook_ns) { agent_ns::g_hook_ns.store(hook_ns, std::memory_order_relaxed); }

void rankscope_python_say(const char* line) {
  if (line && *line) rankscope_agent_say(line);
}
