// NVTX capture: the capture library is an NVTX v3 injection library. Every
// module (shared object) that uses NVTX loads it through
// NVTX_INJECTION64_PATH on its first NVTX call and asks for handlers; each
// gets the same stateless handlers, so any number of modules may initialise.
//
// Events: push/pop ranges are kNvtxRange on the thread's track; start/end
// ranges, which may end on another thread, are kNvtxRange on the track of
// their domain; marks are kNvtxMark. `seq` holds the category and
// `comm_hash` the domain's name id + 1 (0: the default domain). Naming a
// category records a kInstant named after the category, with its id in `seq`.
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cwchar>
#include <new>
#include <string>

#include "capture_source.h"
#include "rankscope/rank_agent/agent.h"

namespace rankscope::agent {
namespace {

constexpr uint32_t kMaxDomains = 256;
constexpr uint32_t kMaxDepth = 128;
constexpr uint32_t kMaxOpenRanges = 1 << 12;
constexpr uint32_t kMaxRangeThreads = 1024;

bool capturing() { return rankscope_agent_capturing(kCaptureNvtx); }

uint32_t intern(const char* text) { return text ? rankscope_agent_intern(text, std::strlen(text)) : kNoName; }

uint32_t intern(const wchar_t* text) {
  if (!text) return kNoName;
  char narrow[256];
  size_t n = 0;
  for (; text[n] && n < sizeof(narrow) - 1; ++n) narrow[n] = text[n] < 128 ? static_cast<char>(text[n]) : '?';
  return rankscope_agent_intern(narrow, n);
}

// Domains are handed out as small integers disguised as handles.
struct Domain {
  uint32_t name_id;
  uint32_t track;
};
Domain g_domains[kMaxDomains + 1];  // index 0: the default domain
std::atomic<uint32_t> g_domain_count{0};

uint32_t domain_index(nvtxDomainHandle_t domain) {
  const auto index = reinterpret_cast<uintptr_t>(domain);
  return index <= kMaxDomains ? static_cast<uint32_t>(index) : 0;
}

uint32_t string_id(nvtxStringHandle_t handle) {
  const auto value = reinterpret_cast<uintptr_t>(handle);
  return value == 0 ? kNoName : static_cast<uint32_t>(value - 1);
}

uint32_t message_id(const nvtxEventAttributes_t* attributes) {
  if (!attributes) return kNoName;
  switch (attributes->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return intern(attributes->message.ascii);
    case NVTX_MESSAGE_TYPE_UNICODE: return intern(attributes->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED: return string_id(attributes->message.registered);
    default: return kNoName;
  }
}

// A domain as its events' comm_hash names it: its name id + 1; 0 for the default domain.
uint64_t domain_key(uint32_t domain) { return domain == 0 ? 0 : uint64_t{g_domains[domain].name_id} + 1; }

Event nvtx_event(EventKind kind, int64_t begin, int64_t end, uint32_t name_id, uint32_t domain, uint32_t category) {
  Event e{};
  e.begin_ns = begin;
  e.end_ns = end;
  e.kind = kind;
  e.name_id = name_id == kNoName ? 0 : name_id;
  e.track = kThreadTrack;
  e.peer = kNoPeer;
  e.seq = category;
  e.comm_hash = domain_key(domain);
  return e;
}

// ------------------------------------------------------- push and pop ---

struct OpenRange {
  int64_t begin;
  uint32_t name_id;
  uint32_t domain;
  uint32_t category;
};

// A thread's open push/pop ranges, which the writer thread reads for a
// hang's state: a push writes under the sequence lock; a pop only lowers the
// depth. Each range is three words: begin, name_id | domain << 32,
// category. Never freed: a thread's exit hands it to the next thread.
struct ThreadRanges {
  SequenceLock lock;
  std::atomic<uint32_t> depth{0};  // ranges stored, at most kMaxDepth
  std::atomic<bool> in_use{true};
  uint32_t track = 0;
  std::atomic<uint64_t> words[kMaxDepth][3] = {};

  void store(uint32_t at, const OpenRange& range) {
    lock.write([&] {
      words[at][0].store(static_cast<uint64_t>(range.begin), std::memory_order_relaxed);
      words[at][1].store(range.name_id | uint64_t{range.domain} << 32, std::memory_order_relaxed);
      words[at][2].store(range.category, std::memory_order_relaxed);
      depth.store(at + 1, std::memory_order_relaxed);
    });
  }
  OpenRange load(uint32_t at) const {
    const uint64_t names = words[at][1].load(std::memory_order_relaxed);
    return {static_cast<int64_t>(words[at][0].load(std::memory_order_relaxed)), static_cast<uint32_t>(names),
            static_cast<uint32_t>(names >> 32), static_cast<uint32_t>(words[at][2].load(std::memory_order_relaxed))};
  }
  // The open ranges, outermost first, as one consistent picture.
  uint32_t snapshot(OpenRange out[kMaxDepth]) const {
    uint32_t n = 0;
    lock.read([&] {
      n = depth.load(std::memory_order_relaxed);
      for (uint32_t i = 0; i < n; ++i) out[i] = load(i);
    });
    return n;
  }
};
std::atomic<ThreadRanges*> g_thread_ranges[kMaxRangeThreads];

// Plain thread-local data (no guard on each access), initial-exec: one
// instruction to reach, not a call to __tls_get_addr. Where NVTX's loader
// dlopens the library instead of finding it preloaded, initial-exec data
// comes from glibc's small surplus of static TLS: the 3 KiB of open ranges
// would not fit there, so only the pointer to them is thread-local.
[[gnu::tls_model("initial-exec")]] thread_local ThreadRanges* t_ranges = nullptr;
[[gnu::tls_model("initial-exec")]] thread_local uint32_t t_depth = 0;
pthread_key_t g_ranges_key;  // hands a thread's ranges back when it exits

// A slot another thread left, or a new one; nullptr when all are taken.
ThreadRanges* claim_ranges() {
  for (std::atomic<ThreadRanges*>& slot : g_thread_ranges) {
    ThreadRanges* ranges = slot.load(std::memory_order_acquire);
    if (ranges == nullptr) {
      auto* made = new (std::nothrow) ThreadRanges();
      if (!made) return nullptr;
      if (slot.compare_exchange_strong(ranges, made, std::memory_order_acq_rel)) {
        ranges = made;
      } else {
        delete made;
        continue;
      }
    } else {
      bool in_use = false;
      if (!ranges->in_use.compare_exchange_strong(in_use, true, std::memory_order_acq_rel)) continue;
    }
    ranges->track = rankscope_agent_thread_track();
    ranges->depth.store(0, std::memory_order_relaxed);
    pthread_setspecific(g_ranges_key, ranges);
    t_ranges = ranges;
    return ranges;
  }
  return nullptr;
}

int push(uint32_t name_id, uint32_t domain, uint32_t category) {
  if (!capturing()) return -1;
  const uint32_t depth = t_depth++;
  ThreadRanges* ranges = t_ranges;
  // Only with no range open (the first push, or after no slot was left), so
  // that below every range stored, all were stored.
  if (ranges == nullptr && depth == 0) ranges = claim_ranges();
  if (ranges && depth < kMaxDepth) {
    const int64_t now = rankscope_agent_now();
    ranges->store(depth, {now, name_id, domain, category});
    rankscope_agent_range_edge(name_id, domain_key(domain), now, true);
  }
  return static_cast<int>(depth);
}

int pop() {
  if (t_depth == 0) return -1;
  const uint32_t depth = --t_depth;
  ThreadRanges* ranges = t_ranges;
  if (depth < kMaxDepth && ranges) {
    ranges->depth.store(depth, std::memory_order_relaxed);
    if (capturing()) {
      const OpenRange open = ranges->load(depth);
      const Event e = nvtx_event(EventKind::kNvtxRange, open.begin, rankscope_agent_now(), open.name_id, open.domain,
                                 open.category);
      rankscope_agent_record(&e);
      rankscope_agent_range_edge(open.name_id, e.comm_hash, e.end_ns, false);
    }
  }
  return static_cast<int>(depth);
}

void mark(uint32_t name_id, uint32_t domain, uint32_t category) {
  if (!capturing()) return;
  const int64_t now = rankscope_agent_now();
  const Event e = nvtx_event(EventKind::kNvtxMark, now, now, name_id, domain, category);
  rankscope_agent_record(&e);
}

// ------------------------------------------------------ start and end ---

// Ranges that may end on another thread: a ring of slots, the id carrying the
// slot and a generation so that a stale id ends nothing.
struct StartedRange {
  std::atomic<uint64_t> id{0};
  OpenRange range;
};
StartedRange g_started[kMaxOpenRanges];
std::atomic<uint64_t> g_next_range{1};

nvtxRangeId_t start(uint32_t name_id, uint32_t domain, uint32_t category) {
  if (!capturing()) return 0;
  const uint64_t id = g_next_range.fetch_add(1, std::memory_order_relaxed);
  StartedRange& slot = g_started[id % kMaxOpenRanges];
  slot.range = {rankscope_agent_now(), name_id, domain, category};
  slot.id.store(id, std::memory_order_release);
  rankscope_agent_range_edge(name_id, domain_key(domain), slot.range.begin, true);
  return id;
}

void end(nvtxRangeId_t id) {
  if (id == 0) return;
  StartedRange& slot = g_started[id % kMaxOpenRanges];
  uint64_t expected = id;
  if (!slot.id.compare_exchange_strong(expected, 0, std::memory_order_acq_rel) || !capturing()) return;
  Event e = nvtx_event(EventKind::kNvtxRange, slot.range.begin, rankscope_agent_now(), slot.range.name_id,
                       slot.range.domain, slot.range.category);
  e.track = static_cast<uint16_t>(g_domains[slot.range.domain].track);
  rankscope_agent_record(&e);
  rankscope_agent_range_edge(slot.range.name_id, e.comm_hash, e.end_ns, false);
}

uint32_t category_of(const nvtxEventAttributes_t* attributes) { return attributes ? attributes->category : 0; }

// ----------------------------------------------------------- handlers ---

void NVTX_API mark_ex(const nvtxEventAttributes_t* a) { mark(message_id(a), 0, category_of(a)); }
void NVTX_API mark_a(const char* message) { mark(intern(message), 0, 0); }
void NVTX_API mark_w(const wchar_t* message) { mark(intern(message), 0, 0); }
nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t* a) { return start(message_id(a), 0, category_of(a)); }
nvtxRangeId_t NVTX_API start_a(const char* message) { return start(intern(message), 0, 0); }
nvtxRangeId_t NVTX_API start_w(const wchar_t* message) { return start(intern(message), 0, 0); }
void NVTX_API end_range(nvtxRangeId_t id) { end(id); }
int NVTX_API push_ex(const nvtxEventAttributes_t* a) { return push(message_id(a), 0, category_of(a)); }
int NVTX_API push_a(const char* message) { return push(intern(message), 0, 0); }
int NVTX_API push_w(const wchar_t* message) { return push(intern(message), 0, 0); }
int NVTX_API pop_range() { return pop(); }

void name_category(uint32_t category, uint32_t name_id, uint32_t domain) {
  if (!capturing()) return;
  const int64_t now = rankscope_agent_now();
  const Event e = nvtx_event(EventKind::kInstant, now, now, name_id, domain, category);
  rankscope_agent_record(&e);
}
void NVTX_API name_category_a(uint32_t category, const char* name) { name_category(category, intern(name), 0); }
void NVTX_API name_category_w(uint32_t category, const wchar_t* name) { name_category(category, intern(name), 0); }

void NVTX_API domain_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  mark(message_id(a), domain_index(d), category_of(a));
}
nvtxRangeId_t NVTX_API domain_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return start(message_id(a), domain_index(d), category_of(a));
}
void NVTX_API domain_end(nvtxDomainHandle_t, nvtxRangeId_t id) { end(id); }
int NVTX_API domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return push(message_id(a), domain_index(d), category_of(a));
}
int NVTX_API domain_pop(nvtxDomainHandle_t) { return pop(); }
void NVTX_API domain_name_category_a(nvtxDomainHandle_t d, uint32_t category, const char* name) {
  name_category(category, intern(name), domain_index(d));
}
void NVTX_API domain_name_category_w(nvtxDomainHandle_t d, uint32_t category, const wchar_t* name) {
  name_category(category, intern(name), domain_index(d));
}

nvtxStringHandle_t register_string(uint32_t id) {
  return reinterpret_cast<nvtxStringHandle_t>(id == kNoName ? uintptr_t{0} : uintptr_t{id} + 1);
}
nvtxStringHandle_t NVTX_API domain_register_a(nvtxDomainHandle_t, const char* text) { return register_string(intern(text)); }
nvtxStringHandle_t NVTX_API domain_register_w(nvtxDomainHandle_t, const wchar_t* text) {
  return register_string(intern(text));
}

nvtxDomainHandle_t create_domain(uint32_t name_id, const std::string& label) {
  const uint32_t index = g_domain_count.fetch_add(1, std::memory_order_relaxed) + 1;
  if (index > kMaxDomains) return nullptr;  // the default domain then
  g_domains[index].name_id = name_id;
  g_domains[index].track = rankscope_agent_track(TrackType::kNvtxDomain, index, -1,
                                                 ("NVTX " + label + " start/end ranges").c_str());
  return reinterpret_cast<nvtxDomainHandle_t>(uintptr_t{index});
}
nvtxDomainHandle_t NVTX_API domain_create_a(const char* name) { return create_domain(intern(name), name ? name : ""); }
nvtxDomainHandle_t NVTX_API domain_create_w(const wchar_t* name) {
  const uint32_t id = intern(name);
  return create_domain(id, "domain " + std::to_string(id));
}
void NVTX_API domain_destroy(nvtxDomainHandle_t) {}

template <typename Handler>
void install(NvtxFunctionTable table, unsigned int size, unsigned int slot, Handler handler) {
  if (slot < size && table[slot]) *table[slot] = reinterpret_cast<NvtxFunctionPointer>(handler);
}

bool install_handlers(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return false;
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned int core_size = 0, core2_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) ||
      !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size)) {
    return false;
  }
  install(core, core_size, NVTX_CBID_CORE_MarkEx, mark_ex);
  install(core, core_size, NVTX_CBID_CORE_MarkA, mark_a);
  install(core, core_size, NVTX_CBID_CORE_MarkW, mark_w);
  install(core, core_size, NVTX_CBID_CORE_RangeStartEx, start_ex);
  install(core, core_size, NVTX_CBID_CORE_RangeStartA, start_a);
  install(core, core_size, NVTX_CBID_CORE_RangeStartW, start_w);
  install(core, core_size, NVTX_CBID_CORE_RangeEnd, end_range);
  install(core, core_size, NVTX_CBID_CORE_RangePushEx, push_ex);
  install(core, core_size, NVTX_CBID_CORE_RangePushA, push_a);
  install(core, core_size, NVTX_CBID_CORE_RangePushW, push_w);
  install(core, core_size, NVTX_CBID_CORE_RangePop, pop_range);
  install(core, core_size, NVTX_CBID_CORE_NameCategoryA, name_category_a);
  install(core, core_size, NVTX_CBID_CORE_NameCategoryW, name_category_w);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, domain_mark);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, domain_start);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, domain_end);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, domain_push);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, domain_pop);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainNameCategoryA, domain_name_category_a);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainNameCategoryW, domain_name_category_w);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, domain_register_a);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW, domain_register_w);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, domain_create_a);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, domain_create_w);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, domain_destroy);
  return true;
}

class NvtxSource final : public CaptureSource {
 public:
  uint32_t bit() const override { return kCaptureNvtx; }
  bool start(const AgentSettings& settings, std::string& why_not) override {
    pthread_key_create(&g_ranges_key, [](void* opaque) {
      auto* ranges = static_cast<ThreadRanges*>(opaque);
      ranges->depth.store(0, std::memory_order_relaxed);
      ranges->in_use.store(false, std::memory_order_release);
      t_ranges = nullptr;
    });
    g_domains[0].track = rankscope_agent_track(TrackType::kNvtxDomain, 0, -1, "NVTX start/end ranges");
    if (settings.nvtx_injection_path.empty()) {
      why_not = "NVTX_INJECTION64_PATH is not set (rankscope run sets it to the capture library)";
      return false;
    }
    return true;
  }
  void stop() override {}
  // Push/pop ranges: start/end ranges, which any thread may end, are not
  // read while their threads write them.
  void add_open_events(int64_t now, std::vector<Event>& out) const override {
    OpenRange open[kMaxDepth];
    for (const std::atomic<ThreadRanges*>& slot : g_thread_ranges) {
      const ThreadRanges* ranges = slot.load(std::memory_order_acquire);
      if (!ranges || !ranges->in_use.load(std::memory_order_acquire)) continue;
      const uint32_t n = ranges->snapshot(open);
      for (uint32_t i = 0; i < n; ++i) {
        Event e = nvtx_event(EventKind::kNvtxRange, open[i].begin, now, open[i].name_id, open[i].domain, open[i].category);
        e.track = static_cast<uint16_t>(ranges->track);
        out.push_back(e);
      }
    }
  }
};

}  // namespace

CaptureSource& nvtx_capture_source() {
  static NvtxSource source;
  return source;
}

}  // namespace rankscope::agent

// Called by the NVTX loader of each module, once per module. Returning 0
// turns that module's NVTX calls into no-ops: right for processes that do
// not capture.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  if (!rankscope_agent_capturing(rankscope::agent::kCaptureNvtx) || !get_export_table) return 0;
  return rankscope::agent::install_handlers(get_export_table) ? 1 : 0;
}
