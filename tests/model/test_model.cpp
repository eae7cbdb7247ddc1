#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "rankscope/model/counters.h"
#include "rankscope/model/event.h"
#include "rankscope/model/host_phases.h"
#include "rankscope/model/json.h"
#include "rankscope/model/metadata.h"
#include "rankscope/model/process_usage.h"

namespace rankscope {
namespace {

TEST(EventModel, KindNamesRoundTrip) {
  for (int k = 1; k <= kEventKindCount; ++k) {
    const auto kind = static_cast<EventKind>(k);
    ASSERT_EQ(event_kind_from_name(event_kind_name(kind)), kind);
  }
  EXPECT_FALSE(event_kind_from_name("no_such_kind"));
  EXPECT_EQ(event_kind_name(static_cast<EventKind>(200)), "invalid");
}

TEST(EventModel, DataTypeSizes) {
  EXPECT_EQ(data_type_size(DataType::kFloat32), 4u);
  EXPECT_EQ(data_type_size(DataType::kBfloat16), 2u);
  EXPECT_EQ(data_type_size(DataType::kFloat8E4M3), 1u);
  EXPECT_EQ(data_type_size(DataType::kOther), 0u);
}

// The names torch.profiler, the Python hook and users give the phases of a step.
TEST(HostPhases, KnownByTheNamesOfRanges) {
  EXPECT_EQ(host_phase("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"), HostPhase::kDataLoading);
  EXPECT_EQ(host_phase("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"), HostPhase::kDataLoading);
  EXPECT_EQ(host_phase("DistributedDataParallel.forward"), HostPhase::kForward);
  EXPECT_EQ(host_phase("autograd::engine::evaluate_function: AddmmBackward0"), HostPhase::kBackward);
  EXPECT_EQ(host_phase("Optimizer.step#SGD.step"), HostPhase::kOptimizer);
  EXPECT_EQ(host_phase("Optimizer.zero_grad#AdamW.zero_grad"), HostPhase::kOptimizer);
  for (const char* name : {"forward", "Forward", "## forward ##", "forward_pass", "FWD"}) {
    EXPECT_EQ(host_phase(name), HostPhase::kForward) << name;
  }
  for (const char* name : {"backward", "Backward Pass", "bwd"}) EXPECT_EQ(host_phase(name), HostPhase::kBackward) << name;
  for (const char* name : {"optimizer", "optimizer.step", "optimizer_step", "Optimizer Step"}) {
    EXPECT_EQ(host_phase(name), HostPhase::kOptimizer) << name;
  }
  EXPECT_EQ(host_phase("data loading"), HostPhase::kDataLoading);
  for (const char* name : {"", "#", "ProfilerStep#3", "aten::addmm", "loss.backward", "forwarding", "my forward",
                           "nccl:all_reduce", "gloo:all_reduce"}) {
    EXPECT_EQ(host_phase(name), HostPhase::kNone) << name;
  }
  EXPECT_EQ(host_phase_name(HostPhase::kDataLoading), "data loading");
}

TEST(Metadata, EncodeDecodeRoundTrip) {
  RankMetadata m;
  m.rank = 5;
  m.world_size = 64;
  m.local_rank = 1;
  m.local_size = 8;
  m.node_id = 0;
  m.pid = 4242;
  m.host = "node-a\nwith newline";
  m.gpu_uuids = "GPU-1,GPU-2";
  m.launcher = "openmpi";
  m.agent_version = "0.1.0";
  m.capture = "mpi,nvtx buffer_mb=64";
  m.start_wall_ns = 1700000000123456789;
  m.start_local_ns = -5;
  m.job = {"openmpi:1399717889", 1700000000000000001};
  const RankMetadata back = RankMetadata::decode(m.encode());
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.world_size, 64);
  EXPECT_EQ(back.local_rank, 1);
  EXPECT_EQ(back.local_size, 8);
  EXPECT_EQ(back.node_id, 0);
  EXPECT_EQ(back.pid, 4242);
  EXPECT_EQ(back.launcher, "openmpi");
  EXPECT_EQ(back.agent_version, "0.1.0");
  EXPECT_EQ(back.host, "node-a with newline");
  EXPECT_EQ(back.gpu_uuids, "GPU-1,GPU-2");
  EXPECT_EQ(back.capture, "mpi,nvtx buffer_mb=64");
  EXPECT_EQ(back.start_wall_ns, 1700000000123456789);
  EXPECT_EQ(back.start_local_ns, -5);
  EXPECT_EQ(back.job.id, "openmpi:1399717889");
  EXPECT_EQ(back.job.start_wall_ns, 1700000000000000001);
}

// Metadata written before the job identity was recorded decodes without one.
TEST(Metadata, OlderMetadataHasNoJobIdentity) {
  const RankMetadata m = RankMetadata::decode("rank=3\nworld_size=4\nstart_wall_ns=17\n");
  EXPECT_FALSE(m.job.known());
  EXPECT_EQ(m.job.text(), "unnamed job, started at an unknown time");
}

// Two jobs differ when a part both know differs; an unknown part matches anything.
TEST(Metadata, JobIdentitiesContradictOnlyInWhatBothKnow) {
  const JobIdentity job{"openmpi:1", 5'000'000'000};
  EXPECT_FALSE(job.contradicts(job));
  EXPECT_TRUE(job.contradicts({"openmpi:2", 5'000'000'000}));
  EXPECT_TRUE(job.contradicts({"openmpi:1", 6'000'000'000}));
  EXPECT_TRUE(job.contradicts({"", 6'000'000'000}));
  EXPECT_FALSE(job.contradicts({"openmpi:1", 0}));
  EXPECT_FALSE(job.contradicts({"", 5'000'000'000}));
  EXPECT_FALSE(job.contradicts({}));
  EXPECT_EQ(job.text(), "openmpi:1, started 1970-01-01T00:00:05.000000000Z");
}

TEST(Metadata, DecodeIgnoresUnknownKeysAndBadNumbers) {
  const RankMetadata m = RankMetadata::decode("rank=3\nfuture_key=1\nworld_size=abc\nhost=h=x\n");
  EXPECT_EQ(m.rank, 3);
  EXPECT_EQ(m.world_size, 0);
  EXPECT_EQ(m.host, "h=x");
}

TEST(Counters, SetAddGetEncode) {
  Counters c;
  c.add(counter::kEventsDropped, 5);
  c.add(counter::kEventsDropped, 7);
  c.set("other", 1);
  EXPECT_EQ(c.get(counter::kEventsDropped), 12u);
  EXPECT_EQ(c.get("absent"), 0u);
  const Counters back = Counters::decode(c.encode());
  EXPECT_EQ(back.entries(), c.entries());
}

TEST(Json, EscapesAndNests) {
  JsonWriter json;
  json.begin_object().key("a\"b").value("x\ny\x01").key("n").value(int64_t{-3}).key("list").begin_array();
  json.value(uint64_t{1}).value(2.5).value(true).null().end_array().end_object();
  EXPECT_EQ(json.str(), R"({"a\"b":"x\ny\u0001","n":-3,"list":[1,2.5,true,null]})");
}

TEST(Json, DoublesReadBackAsThemselvesAndEscapesSitAnywhere) {
  // Every double as printf's %.17g writes it, so that it reads back as itself.
  for (const double number : {0.1, 1.0 / 3, -2.5e-300, 1e300, 123456789012345678.0, 0.0, -0.0, 5e-324}) {
    JsonWriter json;
    json.value(number);
    char printed[32];
    std::snprintf(printed, sizeof(printed), "%.17g", number);
    EXPECT_EQ(json.str(), printed);
    EXPECT_EQ(std::strtod(json.str().c_str(), nullptr), number);
  }
  JsonWriter json;
  json.begin_array().value("\tstarts").value("ends\\").value("\"\"").value("").value("plain").end_array();
  EXPECT_EQ(json.str(), R"(["\tstarts","ends\\","\"\"","","plain"])");
}

TEST(Json, AFigureNotMeasuredIsNullBesideItsReason) {
  JsonWriter json;
  json.begin_object().figure("wait_ns", int64_t{0}, "no other rank").figure("pct", 12.5, "").end_object();
  EXPECT_EQ(json.str(), R"({"wait_ns":null,"wait_ns_reason":"no other rank","pct":12.5})");
}

}  // namespace
}  // namespace rankscope

namespace rankscope {
namespace {

TEST(CounterRegistry, EveryCounterIsNamedOnceAndDescribed) {
  std::set<std::string_view> names;
  for (const counter::Definition& definition : counter::registry()) {
    EXPECT_TRUE(names.insert(definition.name).second) << definition.name << " is registered twice";
    EXPECT_FALSE(definition.meaning.empty()) << definition.name;
    EXPECT_EQ(definition.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"), std::string_view::npos)
        << definition.name;
    EXPECT_EQ(counter::meaning(definition.name), definition.meaning);
  }
  EXPECT_GE(names.size(), 55u);
  EXPECT_TRUE(counter::meaning("no_such_counter").empty());
  EXPECT_TRUE(counter::is_cost(counter::kCostPollPs));
  EXPECT_FALSE(counter::is_cost(counter::kEventsDropped));
  EXPECT_TRUE(counter::is_process_usage(counter::kProcessPeakRssBytes));
  EXPECT_FALSE(counter::is_process_usage(counter::kKilledBySignal));
}

// What a rank that captured nothing is told, by what its counters show.
TEST(CounterRegistry, NothingCapturedNamesTheCauseItsCountersShow) {
  const auto causes = [](std::initializer_list<std::pair<std::string_view, uint64_t>> values, std::string_view capture) {
    Counters counters;
    for (const auto& [name, value] : values) counters.set(name, value);
    return counter::nothing_captured_causes(counters, capture);
  };
  const std::string_view sidecar = "mpi,nvtx,python mode=sidecar buffer_mb=64";
  EXPECT_NE(causes({{counter::kPythonHookNotRun, 1}}, sidecar).find("ignored PYTHONPATH"), std::string::npos);
  // An MPI program started in sidecar mode never ran: that, not what it did not call, is the cause.
  EXPECT_EQ(causes({{counter::kSidecarRefusedMpiInit, 1}}, sidecar),
            "its program calls MPI_Init, so sidecar mode stopped it there: profile it with `rankscope run --mode "
            "inprocess`");
  EXPECT_NE(causes({{counter::kPythonHookAttached, 1}}, sidecar).find("never imported torch"), std::string::npos);
  EXPECT_NE(causes({{counter::kPythonHookAttached, 1}, {counter::kPythonTorchHooked, 16}}, sidecar)
                .find("none of the APIs"), std::string::npos);
  EXPECT_NE(causes({{counter::kPythonHookAttached, 1}, {counter::kPythonTorchHooked, 31}}, sidecar)
                .find("never trained"), std::string::npos);
  EXPECT_NE(causes({}, "mpi,nvtx mode=sidecar").find("--capture leaves out python"), std::string::npos);
  const std::string windowed = causes({{counter::kPythonHookAttached, 1}, {counter::kPythonTorchHooked, 31},
                                       {counter::kEventsOutsideWindow, 40}}, sidecar);
  EXPECT_EQ(windowed.find("never trained"), std::string::npos) << windowed;  // it did: outside the window
  EXPECT_EQ(windowed.find("its capture window took in none of its events (40 counted"), 0u) << windowed;
  EXPECT_NE(causes({}, "mpi,nvtx mode=inprocess").find("no MPI call"), std::string::npos);
}

TEST(ProcessUsage, TheKernelsFiguresBecomeCounters) {
  rusage usage{};
  usage.ru_maxrss = 2048;  // KiB
  usage.ru_utime = {3, 250000};
  usage.ru_stime = {0, 1000};
  usage.ru_nivcsw = 17;
  usage.ru_majflt = 4;
  Counters counters;
  set_usage_counters(counters, usage);
  EXPECT_EQ(counters.get(counter::kProcessPeakRssBytes), 2048u * 1024);
  EXPECT_EQ(counters.get(counter::kProcessUserCpuNs), 3'250'000'000u);
  EXPECT_EQ(counters.get(counter::kProcessSystemCpuNs), 1'000'000u);
  EXPECT_EQ(counters.get(counter::kProcessInvoluntarySwitches), 17u);
  EXPECT_EQ(counters.get(counter::kProcessMajorFaults), 4u);
}

// /proc/self/mountinfo and /proc/PID/cgroup as a hybrid (v1 and v2) host, a
// unified (v2 only) host and a container whose mount root is its own cgroup have them.
constexpr const char* kHybridMounts =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
constexpr const char* kUnifiedMounts = "29 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

TEST(ProcessUsage, TheOomCountOfTheProcesssMemoryCgroupIsFound) {
  EXPECT_EQ(memory_cgroup_oom_file("4:memory:/job/step0\n1:cpu:/\n0::/\n", kHybridMounts),
            "/sys/fs/cgroup/memory/job/step0/memory.oom_control");
  EXPECT_EQ(memory_cgroup_oom_file("5:cpuacct,memory:/\n0::/x\n", kHybridMounts),
            "/sys/fs/cgroup/memory/memory.oom_control");
  EXPECT_EQ(memory_cgroup_oom_file("0::/user.slice/job-7.scope\n", kUnifiedMounts),
            "/sys/fs/cgroup/user.slice/job-7.scope/memory.events");
  EXPECT_EQ(memory_cgroup_oom_file("0::/kubepods/pod1/c1\n",
                                   "29 23 0:26 /kubepods/pod1/c1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n"),
            "/sys/fs/cgroup/memory.events");
  EXPECT_EQ(memory_cgroup_oom_file("4:memory:/a\n", "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"), "");
  EXPECT_EQ(memory_cgroup_oom_file("", kUnifiedMounts), "");
}

TEST(ProcessUsage, OomKillsAreReadFromEitherFile) {
  EXPECT_EQ(parse_oom_kill_count("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 3u);
  EXPECT_EQ(parse_oom_kill_count("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n"), 2u);
  EXPECT_FALSE(parse_oom_kill_count("oom_kill_disable 0\nunder_oom 0\n"));
  EXPECT_FALSE(parse_oom_kill_count("oom_kill lots\n"));
}

}  // namespace
}  // namespace rankscope
