// The capture library as NCCL's profiler plugin, without NCCL or a GPU:
// loaded the way NCCL loads it (dlopen RTLD_NOW | RTLD_LOCAL of the path in
// NCCL_PROFILER_PLUGIN, then dlsym of ncclProfiler_v5 and ncclProfiler_v4),
// driven with the call sequences NCCL makes (from several threads, with NULL
// handles, foreign parents, a full ring), then the shard read back.
// Run by test_nccl_plugin.sh, which sets TEST_NCCL_EXPECT:
//   kernelch  capturing, GPU times from KernelCh (the default)
//   cupti     capturing with RANKSCOPE_NCCL_GPU_TIME=cupti: collectives carry their group's correlation id
//   off       the plugin loads but records nothing (no agent, or NCCL capture refused to start)
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nccl_profiler_abi.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/shard.h"
#include "rankscope/rank_agent/agent.h"
#include "shard_contents.h"

namespace {

namespace abi = rankscope::nccl_profiler;
using rankscope::CommOp;
using rankscope::DataType;
using rankscope::Event;
using rankscope::EventKind;

std::string expected_mode() {
  const char* mode = std::getenv("TEST_NCCL_EXPECT");
  return mode ? mode : "off";
}

int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// What a GPU's %globaltimer reads `ago_ns` before now: it runs on CLOCK_REALTIME.
uint64_t gpu_time(int64_t ago_ns) { return static_cast<uint64_t>(realtime_ns() - ago_ns); }

// The test's own estimate of %globaltimer minus the agent clock.
int64_t gpu_minus_agent_ns() {
  const int64_t before = rankscope_agent_now();
  const int64_t realtime = realtime_ns();
  const int64_t after = rankscope_agent_now();
  return realtime - (before + after) / 2;
}

// The plugin's offset is its own reading of the same clocks, a little earlier.
constexpr int64_t kMappingTolerance = 2'000'000;

struct Plugin {
  void* library = nullptr;
  abi::ProfilerV5* v5 = nullptr;
  abi::ProfilerV4* v4 = nullptr;
};

// As NCCL's plugin loader does it.
const Plugin& plugin() {
  static const Plugin loaded = [] {
    Plugin p;
    const char* path = std::getenv("TEST_CAPTURE_LIBRARY");
    if (!path) return p;
    p.library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p.library) return p;
    p.v5 = static_cast<abi::ProfilerV5*>(dlsym(p.library, "ncclProfiler_v5"));
    p.v4 = static_cast<abi::ProfilerV4*>(dlsym(p.library, "ncclProfiler_v4"));
    return p;
  }();
  return loaded;
}

// ------------------------------------------------------- descriptors ---

abi::EventDescrV5 coll_v5(void* parent, uint64_t seq, const char* func, size_t count, const char* datatype, int root,
                          uint8_t channels, const char* algo, const char* proto) {
  abi::EventDescrV5 d{};
  d.type = abi::kProfileColl;
  d.parentObj = parent;
  d.rank = 1;
  d.coll.seqNumber = seq;
  d.coll.func = func;
  d.coll.count = count;
  d.coll.root = root;
  d.coll.datatype = datatype;
  d.coll.nChannels = channels;
  d.coll.nWarps = 16;
  d.coll.algo = algo;
  d.coll.proto = proto;
  return d;
}

abi::EventDescrV5 p2p_v5(const char* func, int peer, size_t count, const char* datatype, uint8_t channels) {
  abi::EventDescrV5 d{};
  d.type = abi::kProfileP2p;
  d.p2p.func = func;
  d.p2p.peer = peer;
  d.p2p.count = count;
  d.p2p.datatype = datatype;
  d.p2p.nChannels = channels;
  return d;
}

abi::EventDescrV5 typed_v5(uint64_t type, void* parent) {
  abi::EventDescrV5 d{};
  d.type = type;
  d.parentObj = parent;
  return d;
}

void* start(void* context, abi::EventDescrV5 descr) {
  void* handle = reinterpret_cast<void*>(0xdead);  // the plugin must always set it
  EXPECT_EQ(plugin().v5->startEvent(context, &handle, &descr), abi::kSuccess);
  return handle;
}

void stop(void* handle) { EXPECT_EQ(plugin().v5->stopEvent(handle), abi::kSuccess); }

void record(void* handle, abi::EventState state, abi::StateArgsV5* args) {
  EXPECT_EQ(plugin().v5->recordEventState(handle, state, args), abi::kSuccess);
}

// One kernel channel of `task`, as the profiler proxy reports it.
void channel(void* task, uint8_t id, uint64_t gpu_start, uint64_t gpu_stop) {
  abi::EventDescrV5 d = typed_v5(abi::kProfileKernelCh, task);
  d.kernelCh.channelId = id;
  d.kernelCh.pTimer = gpu_start;
  void* handle = start(nullptr, d);
  EXPECT_NE(handle, nullptr);
  abi::StateArgsV5 args{};
  args.kernelCh.pTimer = gpu_stop;
  record(handle, abi::kStateKernelChStop, &args);
  stop(handle);
}

void* init_v5(uint64_t comm_id, const char* name, int nranks, int rank, int* mask) {
  void* context = reinterpret_cast<void*>(0xdead);
  EXPECT_EQ(plugin().v5->init(&context, comm_id, mask, name, 1, nranks, rank, nullptr), abi::kSuccess);
  return context;
}

// --------------------------------------------------- what is expected ---

// Communicators of the kernelch scenario, and GPU windows it expects, by (comm, seq).
constexpr uint64_t kCommA = 0xA11CE;   // "dp", rank 1 of 4: the rooted and unrooted collectives
constexpr uint64_t kCommB = 0xB0B;     // no name, rank 0 of 2: point-to-point, several threads
constexpr uint64_t kCommC = 0xC10C;    // a GPU clock ahead of the agent's mapping
constexpr uint64_t kCommD = 0xD00D;    // the ring filled up
constexpr uint64_t kCommV4 = 0x4444;   // through the v4 table
constexpr int kWorkers = 4;
constexpr int kCollsPerWorker = 200;

struct Window {
  uint64_t gpu_begin;
  uint64_t gpu_end;
};
std::map<std::pair<uint64_t, uint64_t>, Window> g_windows;  // (comm, seq): filled before the proxies run
int64_t g_test_offset = 0;
int g_ring_opened = 0;
int64_t g_ahead_callback_before = 0, g_ahead_callback_after = 0;

// ------------------------------------------------------------- tests ---

TEST(NcclPlugin, LoadsAsNcclLoadsIt) {
  const Plugin& p = plugin();
  ASSERT_NE(p.library, nullptr) << dlerror();
  ASSERT_NE(p.v5, nullptr);
  ASSERT_NE(p.v4, nullptr);
  EXPECT_STREQ(p.v5->name, "rankscope");
  EXPECT_STREQ(p.v4->name, "rankscope");
  // The preloaded (here: linked) capture library and NCCL's dlopen are one instance.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "ncclProfiler_v5"), p.v5);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "ncclProfiler_v4"), p.v4);
}

TEST(NcclPlugin, RecordsNothingWhenNotCapturing) {
  if (expected_mode() != "off") GTEST_SKIP() << "capturing in this run";
  ASSERT_NE(plugin().v5, nullptr);
  int mask = -1;
  void* context = init_v5(kCommA, "dp", 4, 1, &mask);
  EXPECT_EQ(context, nullptr);
  EXPECT_EQ(mask, 0) << "NCCL must not produce events for nobody";
  EXPECT_EQ(start(context, coll_v5(nullptr, 0, "AllReduce", 1, "ncclFloat32", 0, 1, "RING", "LL")), nullptr);
  stop(nullptr);
  EXPECT_EQ(plugin().v5->finalize(context), abi::kSuccess);
}

TEST(NcclPlugin, CollectivesP2pAndChannelsFromSeveralThreads) {
  if (expected_mode() != "kernelch") GTEST_SKIP() << "run for another mode";
  const Plugin& p = plugin();
  ASSERT_NE(p.v5, nullptr);
  g_test_offset = gpu_minus_agent_ns();

  // Two communicators initialised at once; NCCL shares one mask between them.
  int mask = 0;
  void* comm_a = nullptr;
  void* comm_b = nullptr;
  {
    std::thread a([&] { comm_a = init_v5(kCommA, "dp", 4, 1, &mask); });
    std::thread b([&] { comm_b = init_v5(kCommB, nullptr, 2, 0, &mask); });
    a.join();
    b.join();
  }
  ASSERT_NE(comm_a, nullptr);
  ASSERT_NE(comm_b, nullptr);
  EXPECT_NE(comm_a, comm_b);
  EXPECT_EQ(mask, abi::kProfileColl | abi::kProfileP2p | abi::kProfileKernelCh);

  // An implicit group around an AllReduce, as NCCL 2.28 calls it with the
  // default mask: the API events come anyway and get no handle.
  void* group = start(comm_a, typed_v5(abi::kProfileGroupApi, nullptr));
  EXPECT_EQ(group, nullptr);
  record(group, abi::kStateGroupStartApiStop, nullptr);
  void* coll_api = start(comm_a, typed_v5(abi::kProfileCollApi, group));
  EXPECT_EQ(coll_api, nullptr);
  void* all_reduce = start(comm_a, coll_v5(coll_api, 7, "AllReduce", 1024, "ncclFloat32", 0, 2, "RING", "SIMPLE"));
  ASSERT_NE(all_reduce, nullptr);
  stop(all_reduce);  // enqueued
  stop(coll_api);
  record(group, abi::kStateGroupEndApiStart, nullptr);
  stop(group);
  // Its two channels report after the stop, from the proxy thread, with
  // proxy events between them.
  const uint64_t base = gpu_time(1'000'000);
  g_windows[{kCommA, 7}] = {base + 500, base + 9500};
  std::thread proxy([&] {
    abi::EventDescrV5 ch0 = typed_v5(abi::kProfileKernelCh, all_reduce);
    ch0.kernelCh.channelId = 0;
    ch0.kernelCh.pTimer = base + 1000;
    void* h0 = start(comm_a, ch0);
    ASSERT_NE(h0, nullptr);
    abi::EventDescrV5 op = typed_v5(abi::kProfileProxyOp, all_reduce);
    op.proxyOp.pid = getpid();
    op.proxyOp.peer = 2;
    void* proxy_op = start(comm_a, op);
    record(proxy_op, static_cast<abi::EventState>(19), nullptr);
    stop(proxy_op);
    abi::StateArgsV5 stop0{};
    stop0.kernelCh.pTimer = base + 9000;
    record(h0, abi::kStateKernelChStop, &stop0);
    stop(h0);
    channel(all_reduce, 1, base + 500, base + 9500);
  });
  proxy.join();

  // AllGather and Broadcast: NCCL reports their count in bytes, as int8.
  void* all_gather = start(comm_a, coll_v5(nullptr, 3, "AllGather", 2048, "ncclInt8", 0, 1, "RING", "LL"));
  stop(all_gather);
  g_windows[{kCommA, 3}] = {base + 20'000, base + 21'000};
  channel(all_gather, 0, base + 20'000, base + 21'000);
  void* broadcast = start(comm_a, coll_v5(nullptr, 0, "Broadcast", 512, "ncclInt8", 3, 1, "TREE", "LL128"));
  stop(broadcast);
  g_windows[{kCommA, 0}] = {base + 30'000, base + 30'001};
  channel(broadcast, 0, base + 30'000, base + 30'001);
  // A Reduce to root 2 of ncclUint8, which NCCL 2.28.9 calls "Unknown"; NCCL announced no channels.
  void* reduce = start(comm_a, coll_v5(nullptr, 1, "Reduce", 100, "Unknown", 2, 0, "NVLS", "SIMPLE"));
  stop(reduce);

  // Point-to-point on B: two sends to 1 and a receive from 1.
  for (const char* func : {"Send", "Send", "Recv"}) {
    void* task = start(comm_b, p2p_v5(func, 1, 64, "ncclFloat64", 1));
    ASSERT_NE(task, nullptr);
    stop(task);
    channel(task, 0, base + 40'000, base + 41'000);
  }

  // Several user threads enqueue on B; two proxy threads report all their
  // channels afterwards, long after each task stopped.
  std::vector<std::vector<std::pair<void*, uint64_t>>> enqueued(kWorkers);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    for (int i = 0; i < kCollsPerWorker; ++i) {
      const uint64_t seq = 1000 * (w + 1) + i;
      g_windows[{kCommB, seq}] = {base + seq, base + seq + 2000};
    }
    workers.emplace_back([&, w] {
      for (int i = 0; i < kCollsPerWorker; ++i) {
        const uint64_t seq = 1000 * (w + 1) + i;
        void* task = start(comm_b, coll_v5(nullptr, seq, "ReduceScatter", 256, "ncclFloat16", 0, 2, "PAT", "LL"));
        ASSERT_NE(task, nullptr);
        stop(task);
        enqueued[w].emplace_back(task, seq);
      }
    });
  }
  for (auto& t : workers) t.join();
  std::vector<std::thread> proxies;
  for (int half = 0; half < 2; ++half) {
    proxies.emplace_back([&, half] {
      for (int w = half; w < kWorkers; w += 2) {
        for (const auto& [task, seq] : enqueued[w]) {
          channel(task, 0, base + seq + 10, base + seq + 2000);
          channel(task, 1, base + seq, base + seq + 1500);
        }
      }
    });
  }
  for (auto& t : proxies) t.join();

  // NULL handles, NULL contexts, NULL arguments: nothing happens, nothing breaks.
  stop(nullptr);
  record(nullptr, abi::kStateKernelChStop, nullptr);
  abi::StateArgsV5 args{};
  record(nullptr, abi::kStateKernelChStop, &args);
  abi::EventDescrV5 no_handle_wanted = coll_v5(nullptr, 99, "AllReduce", 1, "ncclInt32", 0, 1, "RING", "LL");
  EXPECT_EQ(p.v5->startEvent(comm_a, nullptr, &no_handle_wanted), abi::kSuccess);
  void* handle = reinterpret_cast<void*>(0xdead);
  EXPECT_EQ(p.v5->startEvent(comm_a, &handle, nullptr), abi::kSuccess);
  EXPECT_EQ(handle, nullptr);
  EXPECT_EQ(start(nullptr, coll_v5(nullptr, 99, "AllReduce", 1, "ncclInt32", 0, 1, "RING", "LL")), nullptr);
  EXPECT_EQ(start(comm_a, typed_v5(abi::kProfileKernelCh, nullptr)), nullptr);
  // A KernelCh whose parent is not one of ours, and a ProxyOp of another
  // process's proxy (PXN) with a parent that must not be touched.
  EXPECT_EQ(start(comm_a, typed_v5(abi::kProfileKernelCh, reinterpret_cast<void*>(0x10))), nullptr);
  abi::EventDescrV5 foreign = typed_v5(abi::kProfileProxyOp, reinterpret_cast<void*>(0x10));
  foreign.proxyOp.pid = getpid() + 1;
  void* foreign_op = start(comm_a, foreign);
  record(foreign_op, static_cast<abi::EventState>(3), &args);
  stop(foreign_op);
  void* ctrl = start(comm_a, typed_v5(abi::kProfileProxyCtrl, nullptr));
  for (int state = 13; state <= 18; ++state) record(ctrl, static_cast<abi::EventState>(state), &args);
  stop(ctrl);
  void* all_reduce_nulls = start(comm_a, coll_v5(nullptr, 8, "AllReduce", 4, "ncclInt32", 0, 1, "RING", "LL"));
  stop(all_reduce_nulls);
  abi::EventDescrV5 ch = typed_v5(abi::kProfileKernelCh, all_reduce_nulls);
  ch.kernelCh.pTimer = base + 50'000;
  void* ch_handle = start(comm_a, ch);
  record(ch_handle, abi::kStateKernelChStop, nullptr);  // no stop time: the window has no end
  stop(ch_handle);

  // One channel more than announced, and one task whose channels never all report.
  void* extra = start(comm_a, coll_v5(nullptr, 9, "AllReduce", 4, "ncclInt32", 0, 1, "RING", "LL"));
  stop(extra);
  g_windows[{kCommA, 9}] = {base + 60'000, base + 61'000};
  channel(extra, 0, base + 60'000, base + 61'000);
  channel(extra, 1, base + 60'000, base + 69'000);
  void* partial = start(comm_a, coll_v5(nullptr, 10, "AllReduce", 4, "ncclInt32", 0, 3, "RING", "LL"));
  stop(partial);
  g_windows[{kCommA, 10}] = {base + 70'000, base + 71'000};
  channel(partial, 0, base + 70'000, base + 71'000);

  // A GPU whose clock runs 50 ms ahead of the mapping: its stop is reported
  // before it happened, so the plugin moves the mapping.
  void* comm_c = init_v5(kCommC, "ahead", 2, 1, &mask);
  void* ahead = start(comm_c, coll_v5(nullptr, 0, "AllReduce", 4, "ncclInt32", 0, 1, "RING", "LL"));
  stop(ahead);
  const uint64_t ahead_stop = gpu_time(-50'000'000);
  g_ahead_callback_before = rankscope_agent_now();
  channel(ahead, 0, ahead_stop - 1'000'000, ahead_stop);
  g_ahead_callback_after = rankscope_agent_now();

  // A task whose channel reports only after its slot went to another task,
  // and one whose channel started in time but stops too late.
  void* late = start(comm_a, coll_v5(nullptr, 12, "AllReduce", 4, "ncclInt32", 0, 1, "RING", "LL"));
  stop(late);
  void* stops_late = start(comm_a, coll_v5(nullptr, 13, "AllReduce", 4, "ncclInt32", 0, 1, "RING", "LL"));
  stop(stops_late);
  abi::EventDescrV5 in_time = typed_v5(abi::kProfileKernelCh, stops_late);
  in_time.kernelCh.pTimer = base + 90'000;
  void* late_stop = start(comm_a, in_time);
  ASSERT_NE(late_stop, nullptr);

  // The ring fills up: tasks that never stop, until a start gets no handle.
  void* comm_d = init_v5(kCommD, "ring", 2, 0, &mask);
  std::vector<void*> open;
  for (int i = 0; i < 100'000; ++i) {
    void* task = start(comm_d, coll_v5(nullptr, i, "AllReduce", 1, "ncclInt32", 0, 1, "RING", "LL"));
    if (!task) break;
    open.push_back(task);
  }
  g_ring_opened = static_cast<int>(open.size());
  EXPECT_GE(g_ring_opened, 1024);
  EXPECT_LT(g_ring_opened, 100'000) << "the ring never filled";
  for (void* task : open) stop(task);
  abi::EventDescrV5 too_late = typed_v5(abi::kProfileKernelCh, late);
  too_late.kernelCh.pTimer = base + 80'000;
  EXPECT_EQ(start(comm_a, too_late), nullptr) << "a late channel must not land in another task";
  abi::StateArgsV5 late_time{};
  late_time.kernelCh.pTimer = base + 99'000;
  record(late_stop, abi::kStateKernelChStop, &late_time);
  stop(late_stop);

  for (void* comm : {comm_a, comm_b, comm_c, comm_d}) EXPECT_EQ(p.v5->finalize(comm), abi::kSuccess);
  EXPECT_EQ(p.v5->finalize(nullptr), abi::kSuccess);
}

TEST(NcclPlugin, V4TableWithV4Descriptors) {
  if (expected_mode() != "kernelch") GTEST_SKIP() << "run for another mode";
  const Plugin& p = plugin();
  ASSERT_NE(p.v4, nullptr);
  int mask = 0;
  void* context = nullptr;
  ASSERT_EQ(p.v4->init(&context, &mask, "v4 comm", kCommV4, 2, 8, 5, nullptr), abi::kSuccess);
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(mask, abi::kProfileColl | abi::kProfileP2p | abi::kProfileKernelCh);

  // NCCL 2.27's legacy group: no handle; its collective names it as parent.
  abi::EventDescrV4 group{};
  group.type = abi::kProfileGroup;
  void* group_handle = reinterpret_cast<void*>(0xdead);
  p.v4->startEvent(context, &group_handle, &group);
  EXPECT_EQ(group_handle, nullptr);

  abi::EventDescrV4 coll{};
  coll.type = abi::kProfileColl;
  coll.parentObj = group_handle;
  coll.rank = 5;
  coll.coll.seqNumber = 11;
  coll.coll.func = "AllReduce";
  coll.coll.count = 8;
  coll.coll.datatype = "ncclFloat64";
  coll.coll.nChannels = 1;
  coll.coll.algo = "NVLS";
  coll.coll.proto = "SIMPLE";
  void* task = nullptr;
  ASSERT_EQ(p.v4->startEvent(context, &task, &coll), abi::kSuccess);
  ASSERT_NE(task, nullptr);
  p.v4->stopEvent(task);

  const uint64_t base = gpu_time(500'000);
  g_windows[{kCommV4, 11}] = {base, base + 4000};
  abi::EventDescrV4 ch{};
  ch.type = abi::kProfileKernelCh;
  ch.parentObj = task;
  ch.kernelCh.pTimer = base;
  void* ch_handle = nullptr;
  p.v4->startEvent(context, &ch_handle, &ch);
  ASSERT_NE(ch_handle, nullptr);
  abi::StateArgsV4 args{};
  args.kernelCh.pTimer = base + 4000;
  p.v4->recordEventState(ch_handle, abi::kStateKernelChStop, &args);
  p.v4->stopEvent(ch_handle);

  abi::EventDescrV4 recv{};
  recv.type = abi::kProfileP2p;
  recv.p2p.func = "Recv";
  recv.p2p.peer = 0;
  recv.p2p.count = 100;
  recv.p2p.datatype = "ncclBfloat16";
  void* recv_task = nullptr;
  p.v4->startEvent(context, &recv_task, &recv);
  ASSERT_NE(recv_task, nullptr);
  p.v4->stopEvent(recv_task);
  EXPECT_EQ(p.v4->finalize(context), abi::kSuccess);
}

TEST(NcclPlugin, CuptiTimingTiesCollectivesToTheirGroup) {
  if (expected_mode() != "cupti") GTEST_SKIP() << "run for another mode";
  const Plugin& p = plugin();
  ASSERT_NE(p.v5, nullptr);
  int mask = 0;
  void* comm = init_v5(kCommA, "dp", 4, 1, &mask);
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(mask, abi::kProfileColl | abi::kProfileP2p | abi::kProfileGroupApi | abi::kProfileCollApi |
                      abi::kProfileP2pApi | abi::kProfileKernelLaunch);

  // A user group of two collectives and a send, then an implicit group of one.
  void* group = start(comm, typed_v5(abi::kProfileGroupApi, nullptr));
  ASSERT_NE(group, nullptr);
  record(group, abi::kStateGroupStartApiStop, nullptr);
  std::vector<void*> api;
  for (int call = 0; call < 2; ++call) {
    void* coll_api = start(comm, typed_v5(abi::kProfileCollApi, group));
    EXPECT_NE(coll_api, nullptr);
    api.push_back(coll_api);
    stop(coll_api);
  }
  void* p2p_api = start(comm, typed_v5(abi::kProfileP2pApi, group));
  stop(p2p_api);
  record(group, abi::kStateGroupEndApiStart, nullptr);
  // At ncclGroupEnd: the tasks, whose parents are their (stopped) API events, and the launch.
  void* first = start(comm, coll_v5(api[0], 0, "AllReduce", 16, "ncclFloat32", 0, 2, "RING", "LL"));
  void* second = start(comm, coll_v5(api[1], 0, "AllGather", 64, "ncclInt8", 0, 2, "RING", "LL"));
  abi::EventDescrV5 send = p2p_v5("Send", 3, 8, "ncclInt32", 1);
  send.parentObj = p2p_api;
  void* send_task = start(comm, send);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_NE(send_task, nullptr);
  // CUPTI does not capture in this test (no GPU): nothing is pushed, and the launch gets no handle.
  void* launch = start(comm, typed_v5(abi::kProfileKernelLaunch, group));
  EXPECT_EQ(launch, nullptr);
  stop(launch);
  for (void* task : {first, second, send_task}) stop(task);
  stop(group);

  void* implicit = start(comm, typed_v5(abi::kProfileGroupApi, nullptr));
  void* coll_api = start(comm, typed_v5(abi::kProfileCollApi, implicit));
  void* alone = start(comm, coll_v5(coll_api, 1, "AllReduce", 16, "ncclFloat32", 0, 2, "RING", "LL"));
  stop(alone);
  stop(coll_api);
  stop(implicit);

  // A collective whose API event got no handle falls back to its own id.
  void* orphan = start(comm, coll_v5(nullptr, 2, "AllReduce", 16, "ncclFloat32", 0, 2, "RING", "LL"));
  stop(orphan);
  EXPECT_EQ(p.v5->finalize(comm), abi::kSuccess);
}

// ------------------------------------------------------ the shard ---

// The shard, with what these tests look up in it.
struct ReadBack : rankscope::testing::ShardContents {
  std::vector<Event> of(uint64_t comm, EventKind kind) const {
    std::vector<Event> out;
    for (const Event& e : events) {
      if (e.comm_hash == comm && e.kind == kind) out.push_back(e);
    }
    return out;
  }
  const Event* find(uint64_t comm, EventKind kind, uint64_t seq, CommOp op) const {
    for (const Event& e : events) {
      if (e.comm_hash == comm && e.kind == kind && e.seq == seq && e.op == op) return &e;
    }
    return nullptr;
  }
};

ReadBack finish_and_read() {
  const std::string shard = rankscope_agent_shard_path();
  EXPECT_TRUE(rankscope_agent_finish());
  ReadBack back{rankscope::testing::read_shard(shard)};
  EXPECT_FALSE(back.scan.damage.any());
  return back;
}

// The identity an enqueue event and its GPU event share.
void expect_identity(const ReadBack& back, const Event& e, const std::string& name, uint64_t bytes, DataType type,
                     rankscope::Algorithm algorithm, rankscope::Protocol protocol, int32_t peer) {
  EXPECT_EQ(back.name(e.name_id), name);
  EXPECT_EQ(e.bytes, bytes) << name;
  EXPECT_EQ(e.datatype, type) << name;
  EXPECT_EQ(e.algorithm, algorithm) << name;
  EXPECT_EQ(e.protocol, protocol) << name;
  EXPECT_EQ(e.peer, peer) << name;
}

// The GPU event of (comm, seq): on the communicator's track, its window the
// channels' earliest start to latest stop, put on the agent clock.
void expect_gpu_window(const ReadBack& back, const Event& gpu, uint64_t comm, uint64_t seq) {
  const Window& w = g_windows.at({comm, seq});
  EXPECT_EQ(gpu.end_ns - gpu.begin_ns, static_cast<int64_t>(w.gpu_end - w.gpu_begin)) << comm << "/" << seq;
  EXPECT_NEAR(static_cast<double>(gpu.begin_ns), static_cast<double>(static_cast<int64_t>(w.gpu_begin) - g_test_offset),
              kMappingTolerance);
  const rankscope::Track* track = back.track(gpu.track);
  ASSERT_NE(track, nullptr);
  EXPECT_EQ(track->type, rankscope::TrackType::kNcclComm);
  EXPECT_EQ(track->os_id, comm);
}

TEST(NcclPlugin, TheShardHoldsWhatWasRecorded) {
  const std::string mode = expected_mode();
  if (mode == "off") {
    EXPECT_FALSE(rankscope_agent_capturing(rankscope::agent::kCaptureNccl));
    return;
  }
  const ReadBack back = finish_and_read();
  using rankscope::Algorithm;
  using rankscope::Protocol;
  using rankscope::TrackType;

  if (mode == "cupti") {
    const auto enqueues = back.of(kCommA, EventKind::kNcclCollectiveEnqueue);
    ASSERT_EQ(enqueues.size(), 4u);
    const Event* first = back.find(kCommA, EventKind::kNcclCollectiveEnqueue, 0, CommOp::kAllReduce);
    const Event* second = back.find(kCommA, EventKind::kNcclCollectiveEnqueue, 0, CommOp::kAllGather);
    const Event* alone = back.find(kCommA, EventKind::kNcclCollectiveEnqueue, 1, CommOp::kAllReduce);
    const Event* orphan = back.find(kCommA, EventKind::kNcclCollectiveEnqueue, 2, CommOp::kAllReduce);
    const auto sends = back.of(kCommA, EventKind::kNcclP2pEnqueue);
    ASSERT_TRUE(first && second && alone && orphan);
    ASSERT_EQ(sends.size(), 1u);
    // One group, one id: the one its kernel launch pushes to CUPTI.
    EXPECT_NE(first->correlation_id, 0u);
    EXPECT_EQ(first->correlation_id, second->correlation_id);
    EXPECT_EQ(first->correlation_id, sends[0].correlation_id);
    EXPECT_NE(alone->correlation_id, first->correlation_id);
    for (const Event* e : {first, second, alone, &sends[0]}) {
      EXPECT_EQ(e->flags, int{rankscope::kFlagExternalCorrelation});
    }
    EXPECT_EQ(orphan->flags, 0);
    EXPECT_NE(orphan->correlation_id, 0u);
    EXPECT_TRUE(back.of(kCommA, EventKind::kNcclCollectiveGpu).empty()) << "KernelCh is not asked for";
    return;
  }

  // Communicator tracks, named once each.
  std::map<uint64_t, std::string> comm_tracks;
  for (const auto& t : back.scan.tracks) {
    if (t.type == TrackType::kNcclComm) comm_tracks[t.os_id] = back.name(t.name_id);
  }
  EXPECT_EQ(comm_tracks[kCommA], "NCCL dp (rank 1 of 4)");
  EXPECT_EQ(comm_tracks[kCommB], "NCCL 0000000000000b0b (rank 0 of 2)");
  EXPECT_EQ(comm_tracks[kCommV4], "NCCL v4 comm (rank 5 of 8)");

  // AllReduce: float32 × 1024, two channels, no root.
  const Event* all_reduce = back.find(kCommA, EventKind::kNcclCollectiveEnqueue, 7, CommOp::kAllReduce);
  const Event* all_reduce_gpu = back.find(kCommA, EventKind::kNcclCollectiveGpu, 7, CommOp::kAllReduce);
  ASSERT_TRUE(all_reduce && all_reduce_gpu);
  for (const Event* e : {all_reduce, all_reduce_gpu}) {
    expect_identity(back, *e, "ncclAllReduce", 4096, DataType::kFloat32, Algorithm::kRing, Protocol::kSimple,
                    rankscope::kNoPeer);
    EXPECT_EQ(e->correlation_id, all_reduce->correlation_id);
    EXPECT_EQ(e->flags, 0);
  }
  EXPECT_LE(all_reduce->begin_ns, all_reduce->end_ns);
  const rankscope::Track* enqueue_track = back.track(all_reduce->track);
  ASSERT_NE(enqueue_track, nullptr);
  EXPECT_EQ(enqueue_track->type, TrackType::kThread) << "the enqueue is on the calling thread";
  expect_gpu_window(back, *all_reduce_gpu, kCommA, 7);

  // AllGather and Broadcast count bytes as int8; Broadcast and Reduce name their root.
  const Event* all_gather = back.find(kCommA, EventKind::kNcclCollectiveGpu, 3, CommOp::kAllGather);
  ASSERT_NE(all_gather, nullptr);
  expect_identity(back, *all_gather, "ncclAllGather", 2048, DataType::kInt8, Algorithm::kRing, Protocol::kLL,
                  rankscope::kNoPeer);
  expect_gpu_window(back, *all_gather, kCommA, 3);
  const Event* broadcast = back.find(kCommA, EventKind::kNcclCollectiveEnqueue, 0, CommOp::kBroadcast);
  ASSERT_NE(broadcast, nullptr);
  expect_identity(back, *broadcast, "ncclBroadcast", 512, DataType::kInt8, Algorithm::kTree, Protocol::kLL128, 3);
  const Event* reduce = back.find(kCommA, EventKind::kNcclCollectiveEnqueue, 1, CommOp::kReduce);
  ASSERT_NE(reduce, nullptr);
  expect_identity(back, *reduce, "ncclReduce", 100, DataType::kUint8, Algorithm::kNvls, Protocol::kSimple, 2);
  EXPECT_EQ(back.find(kCommA, EventKind::kNcclCollectiveGpu, 1, CommOp::kReduce), nullptr) << "it had no channels";

  // Point-to-point: ordinals per (peer, direction), so a send and its receive match.
  std::vector<uint64_t> send_seqs;
  for (const EventKind kind : {EventKind::kNcclP2pEnqueue, EventKind::kNcclP2pGpu}) {
    const auto p2p = back.of(kCommB, kind);
    ASSERT_EQ(p2p.size(), 3u);
    std::multiset<std::pair<int, uint64_t>> seen;
    for (const Event& e : p2p) {
      seen.insert({static_cast<int>(e.op), e.seq});
      expect_identity(back, e, e.op == CommOp::kSend ? "ncclSend" : "ncclRecv", 512, DataType::kFloat64,
                      Algorithm::kNone, Protocol::kNone, 1);
    }
    const int send = static_cast<int>(CommOp::kSend), receive = static_cast<int>(CommOp::kRecv);
    const std::multiset<std::pair<int, uint64_t>> expected = {{send, 0}, {send, 1}, {receive, 0}};
    EXPECT_EQ(seen, expected);
  }

  // Every collective of every worker thread, each with its GPU window.
  const auto enqueues = back.of(kCommB, EventKind::kNcclCollectiveEnqueue);
  const auto gpus = back.of(kCommB, EventKind::kNcclCollectiveGpu);
  ASSERT_EQ(enqueues.size(), size_t{kWorkers * kCollsPerWorker});
  ASSERT_EQ(gpus.size(), size_t{kWorkers * kCollsPerWorker});
  std::set<uint64_t> seqs;
  for (const Event& e : gpus) {
    seqs.insert(e.seq);
    expect_identity(back, e, "ncclReduceScatter", 512, DataType::kFloat16, Algorithm::kPat, Protocol::kLL,
                    rankscope::kNoPeer);
    expect_gpu_window(back, e, kCommB, e.seq);
  }
  EXPECT_EQ(seqs.size(), size_t{kWorkers * kCollsPerWorker});

  // A channel with no stop time: the window is marked as never ended.
  const Event* unended = back.find(kCommA, EventKind::kNcclCollectiveGpu, 8, CommOp::kAllReduce);
  ASSERT_NE(unended, nullptr);
  EXPECT_EQ(unended->flags, int{rankscope::kFlagIncomplete});
  EXPECT_EQ(unended->end_ns, unended->begin_ns);
  // The extra channel does not widen the recorded window; the partial one is recorded with what came.
  const Event* extra = back.find(kCommA, EventKind::kNcclCollectiveGpu, 9, CommOp::kAllReduce);
  ASSERT_NE(extra, nullptr);
  expect_gpu_window(back, *extra, kCommA, 9);
  const Event* partial = back.find(kCommA, EventKind::kNcclCollectiveGpu, 10, CommOp::kAllReduce);
  ASSERT_NE(partial, nullptr);
  expect_gpu_window(back, *partial, kCommA, 10);

  // The GPU ahead of its mapping: its stop lands at its callback, not after.
  const Event* ahead = back.find(kCommC, EventKind::kNcclCollectiveGpu, 0, CommOp::kAllReduce);
  ASSERT_NE(ahead, nullptr);
  EXPECT_GE(ahead->end_ns, g_ahead_callback_before);
  EXPECT_LE(ahead->end_ns, g_ahead_callback_after);
  EXPECT_EQ(ahead->end_ns - ahead->begin_ns, 1'000'000);

  // The full ring: everything that got a handle is there; the late channel is not.
  EXPECT_EQ(back.of(kCommD, EventKind::kNcclCollectiveEnqueue).size(), size_t(g_ring_opened));
  EXPECT_EQ(back.find(kCommA, EventKind::kNcclCollectiveGpu, 12, CommOp::kAllReduce), nullptr);
  for (const Event& e : back.of(kCommD, EventKind::kNcclCollectiveGpu)) {
    ADD_FAILURE() << "a late channel landed in the ring's task " << e.seq;
  }
  // The task whose channel stopped too late: recorded with its start only when its slot was reused.
  const Event* cut_short = back.find(kCommA, EventKind::kNcclCollectiveGpu, 13, CommOp::kAllReduce);
  ASSERT_NE(cut_short, nullptr);
  EXPECT_EQ(cut_short->flags, int{rankscope::kFlagIncomplete});

  // NCCL 2.27's table.
  const Event* v4 = back.find(kCommV4, EventKind::kNcclCollectiveGpu, 11, CommOp::kAllReduce);
  ASSERT_NE(v4, nullptr);
  expect_identity(back, *v4, "ncclAllReduce", 64, DataType::kFloat64, Algorithm::kNvls, Protocol::kSimple,
                  rankscope::kNoPeer);
  expect_gpu_window(back, *v4, kCommV4, 11);
  const auto v4_recv = back.of(kCommV4, EventKind::kNcclP2pEnqueue);
  ASSERT_EQ(v4_recv.size(), 1u);
  expect_identity(back, v4_recv[0], "ncclRecv", 200, DataType::kBfloat16, Algorithm::kNone, Protocol::kNone, 0);
  EXPECT_EQ(v4_recv[0].seq, 0u);

  // Nothing unaccounted for: every loss is a counter.
  const rankscope::Counters& c = back.scan.counters;
  EXPECT_EQ(c.get("nccl_handles_exhausted"), 1u);
  EXPECT_EQ(c.get("nccl_events_without_context"), 1u);
  EXPECT_EQ(c.get("nccl_kernel_channels_unparented"), 2u);
  EXPECT_EQ(c.get("nccl_kernel_channels_late"), 2u);
  EXPECT_EQ(c.get("nccl_kernel_channels_unexpected"), 1u);
  EXPECT_EQ(c.get("nccl_gpu_windows_partial"), 2u);
  EXPECT_EQ(c.get("nccl_gpu_time_after_callback"), 1u);
  EXPECT_GE(c.get("nccl_gpu_offset_raised_max_ns"), 49'000'000u);
  EXPECT_EQ(c.get(rankscope::counter::kEventsDropped), 0u);
}

}  // namespace
