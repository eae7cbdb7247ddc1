// CUDA capture as a rank meets it, on a machine without a GPU. Run by
// test_cuda_capture.sh in one of two ways (TEST_CUDA_EXPECT):
//  - "off": CUDA capture cannot run here (no CUPTI, no driver, an old driver,
//    another CUPTI client): NVTX capture goes on, and CUDA's injection entry,
//    called as cuInit calls it, does no harm;
//  - "capture": a fake libcupti and libcuda (fake_cuda.cpp) stand in for
//    CUDA, and what they hand over reaches the shard: the GPU's records on
//    the agent's clock, on stream tracks and on the calling thread's track;
//  - "profiler_api": cudaProfilerStart and cudaProfilerStop steer the window;
//  - "other_client_later": another tool subscribes to CUPTI while the agent
//    captures, and gets it.
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "rankscope/model/shard.h"
#include "rankscope/rank_agent/agent.h"
#include "shard_contents.h"

namespace {

using rankscope::Event;
using rankscope::EventKind;

std::string expected() {
  const char* mode = std::getenv("TEST_CUDA_EXPECT");
  return mode ? mode : "off";
}

// What the CUDA driver does in cuInit with CUDA_INJECTION64_PATH: find the
// entry in the library and call it (once; a second call must be as harmless).
void call_injection_entry_twice() {
  using Entry = int (*)();
  const auto initialize = reinterpret_cast<Entry>(::dlsym(RTLD_DEFAULT, "InitializeInjection"));
  ASSERT_NE(initialize, nullptr) << "the capture library does not export InitializeInjection";
  EXPECT_EQ(initialize(), 1);
  EXPECT_EQ(initialize(), 1);
}

using rankscope::testing::read_shard;

// The fake CUPTI's record of the calls it got, one a line; empty without it.
std::vector<std::string> fake_cupti_calls() {
  const char* path = std::getenv("RANKSCOPE_CUPTI_PATH");
  void* fake = path ? ::dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  const auto log = fake ? reinterpret_cast<const char* (*)()>(::dlsym(fake, "fake_cupti_log")) : nullptr;
  std::vector<std::string> lines;
  if (!log) return lines;
  std::istringstream text(log());
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  return lines;
}

size_t position(const std::vector<std::string>& calls, const std::string& call) {
  return static_cast<size_t>(std::find(calls.begin(), calls.end(), call) - calls.begin());
}

size_t count_starting(const std::vector<std::string>& calls, const std::string& prefix) {
  return static_cast<size_t>(
      std::count_if(calls.begin(), calls.end(), [&](const std::string& c) { return c.rfind(prefix, 0) == 0; }));
}

TEST(CudaCapture, OffWhereItCannotRunWhileNvtxCapturesOn) {
  if (expected() != "off") GTEST_SKIP() << "run for another case";
  ASSERT_TRUE(rankscope_agent_capturing(rankscope::agent::kCaptureNvtx));
  EXPECT_FALSE(rankscope_agent_capturing(rankscope::agent::kCaptureCuda));
  const std::string shard = rankscope_agent_shard_path();
  ASSERT_FALSE(shard.empty());
  call_injection_entry_twice();

  nvtxRangePushA("step");
  nvtxMarkA("checkpoint");
  nvtxRangePop();

  // A tool's own subscription, which the capture library sees first, reaches
  // the program's CUPTI and comes back with its answer, without a line.
  const auto subscribe = reinterpret_cast<decltype(&cuptiSubscribe)>(::dlsym(RTLD_DEFAULT, "cuptiSubscribe"));
  ASSERT_NE(subscribe, nullptr);
  CUpti_SubscriberHandle handle = nullptr;
  const CUptiResult result =
      subscribe(&handle, [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}, nullptr);
  if (fake_cupti_calls().empty()) {
    EXPECT_NE(result, CUPTI_SUCCESS) << "no CUPTI, or no driver, to subscribe to";
  } else if (std::getenv("FAKE_CUPTI_HOLDER")) {
    EXPECT_EQ(result, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  } else {
    EXPECT_EQ(result, CUPTI_SUCCESS);
    EXPECT_NE(handle, nullptr);
  }
  ASSERT_TRUE(rankscope_agent_finish());

  const auto back = read_shard(shard);
  EXPECT_TRUE(back.scan.ended);
  ASSERT_EQ(back.events.size(), 2u);
  ASSERT_EQ(back.named("step").size(), 1u);
  EXPECT_EQ(back.named("step")[0].kind, EventKind::kNvtxRange);
  ASSERT_EQ(back.named("checkpoint").size(), 1u);
  EXPECT_EQ(back.named("checkpoint")[0].kind, EventKind::kNvtxMark);
  EXPECT_EQ(back.scan.counters.get("capture_sources_off"), 1u);
  ASSERT_TRUE(back.scan.metadata.has_value());
  EXPECT_EQ(back.scan.metadata->gpu_uuids, "");
  // Where a CUPTI was reached (the fake one), it was left as found.
  EXPECT_EQ(count_starting(fake_cupti_calls(), "cuptiActivityEnable"), 0u);
  EXPECT_EQ(back.scan.counters.get("cupti_left_to_other_client"), 0u);
}

TEST(CudaCapture, GpuRecordsReachTheShardOnTheAgentsClockAndTracks) {
  if (expected() != "capture") GTEST_SKIP() << "run for another case";
  ASSERT_TRUE(rankscope_agent_capturing(rankscope::agent::kCaptureCuda));
  ASSERT_TRUE(rankscope_agent_capturing(rankscope::agent::kCaptureNvtx));
  const std::string shard = rankscope_agent_shard_path();
  call_injection_entry_twice();
  nvtxRangePushA("step");  // on this thread's track, where its CUDA calls must land too
  nvtxRangePop();
  // A forked child (a data loader worker) leaves CUPTI to its parent, and exits cleanly.
  const pid_t child = ::fork();
  if (child == 0) std::exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  // The fake hands its buffer over on the forced flush at finish, after
  // capture has stopped: the records must still reach the shard.
  ASSERT_TRUE(rankscope_agent_finish());
  const int64_t finished = rankscope_agent_now();

  const auto back = read_shard(shard);
  EXPECT_TRUE(back.scan.ended);
  ASSERT_TRUE(back.scan.metadata.has_value());
  const int64_t started = back.scan.metadata->start_local_ns;
  EXPECT_EQ(back.scan.metadata->gpu_uuids, "GPU-11111111-1111-1111-1111-111111111111");
  EXPECT_EQ(back.scan.counters.get("cupti_records_without_timestamps"), 1u);
  EXPECT_EQ(back.scan.counters.get("cupti_records_dropped"), 3u);
  EXPECT_EQ(back.scan.counters.get("capture_sources_off"), 0u);

  const auto step = back.named("step");
  const auto kernel = back.named("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  const auto launch = back.named("cuLaunchKernelEx");
  const auto copy = back.named("memcpy HtoD");
  const auto sync = back.named("context synchronize");
  ASSERT_EQ(step.size(), 1u);
  ASSERT_EQ(kernel.size(), 1u);
  ASSERT_EQ(launch.size(), 1u);
  ASSERT_EQ(copy.size(), 1u);
  ASSERT_EQ(sync.size(), 1u);
  EXPECT_TRUE(back.named("unfinished()").empty()) << "a record without timestamps was kept";
  EXPECT_EQ(back.events.size(), 5u);

  EXPECT_EQ(kernel[0].kind, EventKind::kGpuKernel);
  EXPECT_EQ(kernel[0].correlation_id, 4242u);
  EXPECT_EQ(kernel[0].flags, rankscope::kFlagExternalCorrelation);
  EXPECT_EQ(back.track_names.at(kernel[0].track), "GPU 0 stream 7");
  EXPECT_EQ(launch[0].kind, EventKind::kCudaApi);
  EXPECT_EQ(launch[0].correlation_id, 1u);
  EXPECT_EQ(launch[0].track, step[0].track) << "a CUDA call and the host events of its thread share a track";
  EXPECT_EQ(copy[0].kind, EventKind::kGpuMemcpy);
  EXPECT_EQ(copy[0].bytes, 1u << 20);
  EXPECT_EQ(copy[0].track, kernel[0].track);
  EXPECT_EQ(sync[0].kind, EventKind::kGpuSync);
  EXPECT_EQ(back.track_names.at(sync[0].track), "GPU 0 synchronize");
  for (const Event& e : {kernel[0], launch[0], copy[0], sync[0]}) {
    EXPECT_GE(e.begin_ns, started) << "GPU times are on the agent's clock";
    EXPECT_LT(e.begin_ns, e.end_ns);
    EXPECT_LE(e.end_ns, finished);
  }

  // How the source drove CUPTI.
  const std::vector<std::string> calls = fake_cupti_calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.front(), "cuptiSubscribe_v2 rankscope");
  EXPECT_LT(position(calls, "cuptiSetThreadIdType 1"), calls.size()) << "thread ids as gettid()";
  const std::string per_thread_buffers = std::to_string(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER);
  EXPECT_LT(position(calls, "cuptiActivitySetAttribute " + per_thread_buffers + " 1"), calls.size());
  const size_t clock = position(calls, "cuptiActivityRegisterTimestampCallback");
  const auto is_enable = [](const std::string& c) { return c.rfind("cuptiActivityEnable", 0) == 0; };
  const auto first_enable = static_cast<size_t>(std::find_if(calls.begin(), calls.end(), is_enable) - calls.begin());
  EXPECT_LT(clock, first_enable) << "the clock is registered before any kind is enabled";
  for (const int kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                         CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                         CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONTEXT, CUPTI_ACTIVITY_KIND_MEMORY2}) {
    EXPECT_LT(position(calls, "cuptiActivityEnable " + std::to_string(kind)), calls.size()) << kind;
  }
  for (const int kind : {CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
    EXPECT_EQ(position(calls, "cuptiActivityEnable " + std::to_string(kind)), calls.size()) << kind << " enabled whole";
  }
  EXPECT_LT(position(calls, "cuptiActivityEnableDriverApi " + std::to_string(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx) +
                                " 1"),
            calls.size());
  EXPECT_LT(position(calls, "cuptiActivityEnableRuntimeApi " +
                                std::to_string(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) + " 1"),
            calls.size());
  EXPECT_LT(position(calls, "cuptiActivityEnableAllSyncRecords 0"), calls.size());
  EXPECT_LT(position(calls, "buffer 4194304 bytes, aligned 1"), calls.size());
  // Stopped at finish: a forced flush, then everything enabled is disabled again, and CUPTI is let go.
  const size_t flush = position(calls, "cuptiActivityFlushAll 1");
  ASSERT_LT(flush, calls.size());
  EXPECT_EQ(count_starting(calls, "cuptiActivityEnable "), count_starting(calls, "cuptiActivityDisable "));
  EXPECT_GT(position(calls, "cuptiActivityDisable " + std::to_string(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)), flush);
  for (const std::string api : {"cuptiActivityEnableRuntimeApi ", "cuptiActivityEnableDriverApi "}) {
    size_t on = 0, off = 0;
    for (const std::string& c : calls) {
      if (c.rfind(api, 0) == 0) (c.back() == '1' ? on : off) += 1;
    }
    EXPECT_GT(on, 0u) << api;
    EXPECT_EQ(on, off) << api;
  }
  EXPECT_EQ(calls.back(), "cuptiUnsubscribe");
  EXPECT_EQ(count_starting(calls, "cuptiEnableCallback"), 0u) << "callbacks only for --capture-range cudaProfilerApi";
}

// --capture-range cudaProfilerApi: what the program does between
// cudaProfilerStart and cudaProfilerStop is recorded, and nothing else.
TEST(CudaCapture, ProfilerStartAndStopSteerTheWindow) {
  if (expected() != "profiler_api") GTEST_SKIP() << "run for another case";
  ASSERT_TRUE(rankscope_agent_capturing(rankscope::agent::kCaptureCuda));
  const std::string shard = rankscope_agent_shard_path();
  call_injection_entry_twice();
  void* fake = ::dlopen(std::getenv("RANKSCOPE_CUPTI_PATH"), RTLD_NOW | RTLD_NOLOAD);
  using ProfilerCall = CUresult (*)();
  const auto start = reinterpret_cast<ProfilerCall>(::dlsym(fake, "cuProfilerStart"));
  const auto stop = reinterpret_cast<ProfilerCall>(::dlsym(fake, "cuProfilerStop"));
  ASSERT_TRUE(start && stop);
  const auto range = [](const char* name) {
    nvtxRangePushA(name);
    nvtxRangePop();
  };
  range("before");
  start();
  range("inside");
  start();  // changes nothing
  range("still inside");
  stop();
  range("after");
  stop();
  start();
  range("again");
  stop();
  ASSERT_TRUE(rankscope_agent_finish());

  const auto back = read_shard(shard);
  EXPECT_TRUE(back.named("before").empty());
  EXPECT_EQ(back.named("inside").size(), 1u);
  EXPECT_EQ(back.named("still inside").size(), 1u);
  EXPECT_TRUE(back.named("after").empty());
  EXPECT_EQ(back.named("again").size(), 1u);
  EXPECT_EQ(back.scan.counters.get("capture_windows"), 2u);
  EXPECT_GE(back.scan.counters.get("events_outside_window"), 2u);

  const std::vector<std::string> calls = fake_cupti_calls();
  const std::string driver = std::to_string(CUPTI_CB_DOMAIN_DRIVER_API) + " ";
  const std::string runtime = std::to_string(CUPTI_CB_DOMAIN_RUNTIME_API) + " ";
  for (const std::string& call : {driver + std::to_string(CUPTI_DRIVER_TRACE_CBID_cuProfilerStart),
                                  driver + std::to_string(CUPTI_DRIVER_TRACE_CBID_cuProfilerStop),
                                  runtime + std::to_string(CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000),
                                  runtime + std::to_string(CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000)}) {
    EXPECT_LT(position(calls, "cuptiEnableCallback 1 " + call), position(calls, "cuProfilerStart")) << call;
    EXPECT_LT(position(calls, "cuptiEnableCallback 0 " + call), calls.size()) << call << " is left enabled";
  }
}

// A tool that subscribes to CUPTI after the agent did (torch.profiler's
// Kineto gives up on CUDA when refused) gets CUPTI: the agent takes what
// CUPTI holds, leaves it as it found it, with CUPTI's own clock back, and
// captures on without CUDA.
TEST(CudaCapture, AToolSubscribingLaterGetsCupti) {
  if (expected() != "other_client_later") GTEST_SKIP() << "run for another case";
  ASSERT_TRUE(rankscope_agent_capturing(rankscope::agent::kCaptureCuda));
  const std::string shard = rankscope_agent_shard_path();
  call_injection_entry_twice();
  // As a program linked against libcupti calls it: the first definition in the global scope.
  const auto subscribe = reinterpret_cast<decltype(&cuptiSubscribe)>(::dlsym(RTLD_DEFAULT, "cuptiSubscribe"));
  ASSERT_NE(subscribe, nullptr);
  CUpti_SubscriberHandle handle = nullptr;
  ASSERT_EQ(subscribe(&handle, [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}, nullptr),
            CUPTI_SUCCESS);
  EXPECT_NE(handle, nullptr);
  EXPECT_FALSE(rankscope_agent_capturing(rankscope::agent::kCaptureCuda));
  EXPECT_TRUE(rankscope_agent_capturing(rankscope::agent::kCaptureNvtx));

  // The tool's records are stamped as CUPTI stamps them when left alone: CLOCK_REALTIME.
  void* fake = ::dlopen(std::getenv("RANKSCOPE_CUPTI_PATH"), RTLD_NOW | RTLD_NOLOAD);
  const auto stamp = reinterpret_cast<uint64_t (*)()>(::dlsym(fake, "fake_cupti_timestamp"));
  ASSERT_NE(stamp, nullptr);
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const double realtime_ns = static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
  EXPECT_NEAR(static_cast<double>(stamp()), realtime_ns, 1e9);

  nvtxRangePushA("after");
  nvtxRangePop();
  ASSERT_TRUE(rankscope_agent_finish());
  const auto back = read_shard(shard);
  EXPECT_EQ(back.named("ncclDevKernel_AllReduce_Sum_f32_RING_LL").size(), 1u) << "the records CUPTI held are lost";
  EXPECT_EQ(back.named("after").size(), 1u);
  EXPECT_EQ(back.scan.counters.get("cupti_left_to_other_client"), 1u);
  EXPECT_EQ(back.scan.counters.get("capture_sources_off"), 1u);

  // Flushed, then unsubscribed, then CUPTI's clock back, all before the tool's subscription
  // (an unnamed cuptiSubscribe_v2); and nothing of the agent's after it.
  const std::vector<std::string> calls = fake_cupti_calls();
  const size_t tools = position(calls, "cuptiSubscribe_v2 ");
  ASSERT_LT(tools, calls.size());
  EXPECT_LT(position(calls, "cuptiActivityFlushAll 1"), position(calls, "cuptiUnsubscribe"));
  EXPECT_LT(position(calls, "cuptiUnsubscribe"), tools);
  EXPECT_EQ(count_starting(calls, "cuptiActivityRegisterTimestampCallback"), 2u);
  EXPECT_EQ(calls[tools - 1], "cuptiActivityRegisterTimestampCallback");
  EXPECT_EQ(tools, calls.size() - 1) << "the agent called CUPTI after the tool took it: " << calls.back();
}

}  // namespace
