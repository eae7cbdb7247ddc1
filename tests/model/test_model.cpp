#include <gtest/gtest.h>

#include <set>

#include "rankscope/model/counters.h"
#include "rankscope/model/event.h"
#include "rankscope/model/json.h"
#include "rankscope/model/metadata.h"

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
}

}  // namespace
}  // namespace rankscope
