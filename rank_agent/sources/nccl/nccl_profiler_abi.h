// NCCL's profiler plugin interface, versions 5 (NCCL 2.28) and 4 (NCCL 2.27),
// declared here from the documented layout (shared/reference/capture-apis.md
// §1): NCCL installs no header for it, and the plugin must not depend on
// NCCL's sources. Every size and offset the reference gives is checked below
// (x86-64 LP64), so a wrong declaration fails to compile instead of reading
// the wrong bytes at run time. Field names follow the reference, so each line
// can be checked against it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace rankscope::nccl_profiler {

// ncclResult_t: an int-sized enum. The plugin only ever returns success:
// NCCL treats a failing event callback as its own error.
enum Result : int { kSuccess = 0 };

// The logger NCCL hands to init (ncclDebugLogger_t) and its levels.
enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3, kLogAbort = 4, kLogTrace = 5 };
using Logger = void (*)(LogLevel level, unsigned long flags, const char* file, int line, const char* format, ...);

// Event types: one bit each, in the descriptor's `type` and in the activation mask.
enum EventType : uint64_t {
  kProfileGroup = 1,           // legacy group (v4), user thread
  kProfileColl = 2,            // a collective task
  kProfileP2p = 4,             // a send or receive task
  kProfileProxyOp = 8,         // proxy work per channel and peer; may come from another process (PXN)
  kProfileProxyStep = 16,      // proxy work per network step
  kProfileProxyCtrl = 32,      // proxy thread idle/active/sleep/append
  kProfileKernelCh = 64,       // a kernel channel, with GPU timestamps
  kProfileNetPlugin = 128,     // network plugin events
  kProfileGroupApi = 256,      // v5: ncclGroupStart/End
  kProfileCollApi = 512,       // v5: a collective API call
  kProfileP2pApi = 1024,       // v5: a send/recv API call
  kProfileKernelLaunch = 2048, // v5: around the kernel launch (cuLaunchKernelEx)
};

// recordEventState's state (a 4-byte enum). Only the ones rankscope acts on
// are named; the others (proxy states 0-21, v6 copy-engine states 25-30)
// arrive and are ignored.
enum EventState : int {
  kStateKernelChStop = 22,        // KernelCh: the channel's GPU stop time is in the args
  kStateGroupStartApiStop = 23,   // GroupApi: ncclGroupStart returned
  kStateGroupEndApiStart = 24,    // GroupApi: ncclGroupEnd entered
};

// ------------------------------------------------------------- v5 ---

// ncclProfilerEventDescr_v5_t: a header, then one member per event type, all at offset 24.
struct EventDescrV5 {
  uint64_t type;    // one EventType
  void* parentObj;  // the parent event's handle, as the plugin returned it (may be NULL)
  int rank;         // set for Coll, P2p, ProxyOp, ProxyStep, NetPlugin only
  union {
    struct {
      uint64_t seqNumber;  // per communicator and func
      const char* func;    // static literal
      const void* sendBuff;
      void* recvBuff;
      size_t count;        // the task's count: count × datatype size is bytes
      int root;
      const char* datatype;  // static literal
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;    // static literal
      const char* proto;   // static literal
      void* parentGroup;   // the legacy Group handle
    } coll;
    struct {
      const char* func;    // "Send" or "Recv"
      void* buff;
      const char* datatype;
      size_t count;
      int peer;            // rank within the communicator
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      pid_t pid;           // the process whose proxy emits it (PXN: another one)
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;     // GPU start: raw %globaltimer ns
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

// ncclProfilerEventStateArgs_v5_t: 8 bytes, every member at offset 0.
union StateArgsV5 {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // GPU stop: raw %globaltimer ns
  } kernelCh;
};

// ncclProfiler_v5_t: six pointer-sized members.
struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                 int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV5* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, StateArgsV5* eStateArgs);
  Result (*finalize)(void* context);
};

// ------------------------------------------------------------- v4 ---

// ncclProfilerEventDescr_v4_t: `type` is one byte; no API events, no
// parentGroup; every other offset as in v5.
struct EventDescrV4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

// The reference gives the v4 state arguments no difference from v5's.
using StateArgsV4 = StateArgsV5;

// ncclProfiler_v4_t: v5's layout; init takes the communicator hash after its name.
struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                 int nranks, int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, EventDescrV4* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, StateArgsV4* eStateArgs);
  Result (*finalize)(void* context);
};

// ------------------------------------------------ the layout, checked ---

static_assert(sizeof(Result) == 4 && sizeof(EventState) == 4 && sizeof(LogLevel) == 4);
static_assert(sizeof(pid_t) == 4);

static_assert(sizeof(EventDescrV5) == 112 && alignof(EventDescrV5) == 8);
static_assert(offsetof(EventDescrV5, type) == 0 && offsetof(EventDescrV5, parentObj) == 8 &&
              offsetof(EventDescrV5, rank) == 16);
static_assert(offsetof(EventDescrV5, coll.seqNumber) == 24 && offsetof(EventDescrV5, coll.func) == 32 &&
              offsetof(EventDescrV5, coll.sendBuff) == 40 && offsetof(EventDescrV5, coll.recvBuff) == 48 &&
              offsetof(EventDescrV5, coll.count) == 56 && offsetof(EventDescrV5, coll.root) == 64 &&
              offsetof(EventDescrV5, coll.datatype) == 72 && offsetof(EventDescrV5, coll.nChannels) == 80 &&
              offsetof(EventDescrV5, coll.nWarps) == 81 && offsetof(EventDescrV5, coll.algo) == 88 &&
              offsetof(EventDescrV5, coll.proto) == 96 && offsetof(EventDescrV5, coll.parentGroup) == 104);
static_assert(offsetof(EventDescrV5, p2p.func) == 24 && offsetof(EventDescrV5, p2p.buff) == 32 &&
              offsetof(EventDescrV5, p2p.datatype) == 40 && offsetof(EventDescrV5, p2p.count) == 48 &&
              offsetof(EventDescrV5, p2p.peer) == 56 && offsetof(EventDescrV5, p2p.nChannels) == 60 &&
              offsetof(EventDescrV5, p2p.parentGroup) == 64);
static_assert(offsetof(EventDescrV5, groupApi.graphCaptured) == 24 &&
              offsetof(EventDescrV5, groupApi.groupDepth) == 28);
static_assert(offsetof(EventDescrV5, collApi.func) == 24 && offsetof(EventDescrV5, collApi.count) == 32 &&
              offsetof(EventDescrV5, collApi.datatype) == 40 && offsetof(EventDescrV5, collApi.root) == 48 &&
              offsetof(EventDescrV5, collApi.stream) == 56 && offsetof(EventDescrV5, collApi.graphCaptured) == 64);
static_assert(offsetof(EventDescrV5, p2pApi.func) == 24 && offsetof(EventDescrV5, p2pApi.count) == 32 &&
              offsetof(EventDescrV5, p2pApi.datatype) == 40 && offsetof(EventDescrV5, p2pApi.stream) == 48 &&
              offsetof(EventDescrV5, p2pApi.graphCaptured) == 56);
static_assert(offsetof(EventDescrV5, kernelLaunch.stream) == 24);
static_assert(offsetof(EventDescrV5, proxyOp.pid) == 24 && offsetof(EventDescrV5, proxyOp.channelId) == 28 &&
              offsetof(EventDescrV5, proxyOp.peer) == 32 && offsetof(EventDescrV5, proxyOp.nSteps) == 36 &&
              offsetof(EventDescrV5, proxyOp.chunkSize) == 40 && offsetof(EventDescrV5, proxyOp.isSend) == 44);
static_assert(offsetof(EventDescrV5, proxyStep.step) == 24);
static_assert(offsetof(EventDescrV5, kernelCh.channelId) == 24 && offsetof(EventDescrV5, kernelCh.pTimer) == 32);
static_assert(offsetof(EventDescrV5, netPlugin.id) == 24 && offsetof(EventDescrV5, netPlugin.data) == 32);

static_assert(sizeof(StateArgsV5) == 8);
static_assert(offsetof(StateArgsV5, proxyStep.transSize) == 0 &&
              offsetof(StateArgsV5, proxyCtrl.appendedProxyOps) == 0 &&
              offsetof(StateArgsV5, netPlugin.data) == 0 && offsetof(StateArgsV5, kernelCh.pTimer) == 0);

static_assert(sizeof(ProfilerV5) == 48);
static_assert(offsetof(ProfilerV5, name) == 0 && offsetof(ProfilerV5, init) == 8 &&
              offsetof(ProfilerV5, startEvent) == 16 && offsetof(ProfilerV5, stopEvent) == 24 &&
              offsetof(ProfilerV5, recordEventState) == 32 && offsetof(ProfilerV5, finalize) == 40);

static_assert(sizeof(EventDescrV4) == 104 && alignof(EventDescrV4) == 8);
static_assert(offsetof(EventDescrV4, type) == 0 && offsetof(EventDescrV4, parentObj) == 8 &&
              offsetof(EventDescrV4, rank) == 16);
static_assert(offsetof(EventDescrV4, coll.seqNumber) == 24 && offsetof(EventDescrV4, coll.func) == 32 &&
              offsetof(EventDescrV4, coll.sendBuff) == 40 && offsetof(EventDescrV4, coll.recvBuff) == 48 &&
              offsetof(EventDescrV4, coll.count) == 56 && offsetof(EventDescrV4, coll.root) == 64 &&
              offsetof(EventDescrV4, coll.datatype) == 72 && offsetof(EventDescrV4, coll.nChannels) == 80 &&
              offsetof(EventDescrV4, coll.nWarps) == 81 && offsetof(EventDescrV4, coll.algo) == 88 &&
              offsetof(EventDescrV4, coll.proto) == 96);
static_assert(offsetof(EventDescrV4, p2p.func) == 24 && offsetof(EventDescrV4, p2p.buff) == 32 &&
              offsetof(EventDescrV4, p2p.datatype) == 40 && offsetof(EventDescrV4, p2p.count) == 48 &&
              offsetof(EventDescrV4, p2p.peer) == 56 && offsetof(EventDescrV4, p2p.nChannels) == 60);
static_assert(offsetof(EventDescrV4, proxyOp.pid) == 24 && offsetof(EventDescrV4, proxyOp.channelId) == 28 &&
              offsetof(EventDescrV4, proxyOp.peer) == 32 && offsetof(EventDescrV4, proxyOp.nSteps) == 36 &&
              offsetof(EventDescrV4, proxyOp.chunkSize) == 40 && offsetof(EventDescrV4, proxyOp.isSend) == 44);
static_assert(offsetof(EventDescrV4, proxyStep.step) == 24);
static_assert(offsetof(EventDescrV4, kernelCh.channelId) == 24 && offsetof(EventDescrV4, kernelCh.pTimer) == 32);
static_assert(offsetof(EventDescrV4, netPlugin.id) == 24 && offsetof(EventDescrV4, netPlugin.data) == 32);

static_assert(sizeof(ProfilerV4) == 48);
static_assert(offsetof(ProfilerV4, name) == 0 && offsetof(ProfilerV4, init) == 8 &&
              offsetof(ProfilerV4, startEvent) == 16 && offsetof(ProfilerV4, stopEvent) == 24 &&
              offsetof(ProfilerV4, recordEventState) == 32 && offsetof(ProfilerV4, finalize) == 40);

}  // namespace rankscope::nccl_profiler

// The symbols NCCL looks up in the plugin (highest version first), exported
// from the capture library although it hides everything else.
extern "C" {
extern __attribute__((visibility("default"))) rankscope::nccl_profiler::ProfilerV5 ncclProfiler_v5;
extern __attribute__((visibility("default"))) rankscope::nccl_profiler::ProfilerV4 ncclProfiler_v4;
}
