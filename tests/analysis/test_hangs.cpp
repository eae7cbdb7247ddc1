// find_hangs on jobs small enough to work out by hand: three ranks, the
// written state of a hang (incomplete events), and what the ranks that
// never came were doing.
#include <gtest/gtest.h>
#include <mpi.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/analysis/hangs.h"
#include "rankscope/analysis/profile.h"
#include "rankscope/analysis/rank_ends.h"
#include "rankscope/analysis/report.h"
#include "rankscope/merge/merge.h"
#include "rankscope/model/counters.h"
#include "rankscope/model/shard.h"
#include "../support/shard_job_test.h"

namespace rankscope::analysis {
namespace {

constexpr uint16_t kThreadTrack = 0, kWorldTrack = 1, kSplitTrack = 2, kNcclTrack = 3;
constexpr uint64_t kWorld = 5, kSplit = 99, kNccl = 0x5eed;
constexpr uint32_t kAllreduce = 0, kBarrier = 1, kLateWork = 2, kWorldName = 3, kSplitName = 4, kRecv = 5, kSend = 6,
                   kTest = 7, kNcclName = 8, kNcclRecv = 9, kNcclSend = 10, kNcclAllreduce = 11;
// Each rank's rank in the NCCL communicator kNccl, as NCCL numbers its
// members: not the world's order, so that a peer's world rank is found.
constexpr int32_t nccl_rank_of(int32_t world_rank) { return (world_rank + 2) % 3; }

Event event(EventKind kind, uint32_t name, int64_t begin, int64_t end) {
  return testing::host_event(kind, name, begin, end, kThreadTrack);
}

Event allreduce(uint64_t comm, uint64_t seq, int64_t begin, int64_t end, bool unfinished) {
  Event e = event(EventKind::kMpiCollective, kAllreduce, begin, end);
  e.op = CommOp::kAllReduce;
  e.comm_hash = comm;
  e.seq = seq;
  if (unfinished) e.flags = kFlagIncomplete;
  return e;
}

Event unfinished(Event e) {
  e.flags = kFlagIncomplete;
  return e;
}

class HangsTest : public testing::ShardJobTest {
 protected:

  // A rank of three that wrote a hang's state; `in_split` ranks made the
  // communicator kSplit. `ended` are the counters of a rank that did not
  // write a hang's state, but ended (by a signal, by _exit) and wrote its calls then.
  void write_rank(int32_t rank, std::vector<Event> events, bool in_split, bool wrote_state = true,
                  Counters ended = {}) {
    if (process_ != 0) return;
    RankMetadata metadata;
    metadata.rank = rank;
    metadata.world_size = 3;
    metadata.host = "node-0";
    ShardWriter writer;
    ASSERT_TRUE(writer.open((dir_ / ("rank-" + std::to_string(rank) + ".shard")).string(), metadata, 0));
    const std::pair<uint32_t, std::string_view> names[] = {
        {kAllreduce, "MPI_Allreduce"},  {kBarrier, "MPI_Barrier"},        {kLateWork, "late work"},
        {kWorldName, "MPI_COMM_WORLD"}, {kSplitName, "MPI comm 99 (3 ranks)"}, {kRecv, "MPI_Recv"},
        {kSend, "MPI_Send"},           {kTest, "MPI_Test"},           {kNcclRecv, "ncclRecv"},
        {kNcclSend, "ncclSend"},       {kNcclAllreduce, "ncclAllReduce"}};
    ASSERT_TRUE(writer.write_strings(names, 0));
    const std::string nccl_name = "NCCL pp (rank " + std::to_string(nccl_rank_of(rank)) + " of 3)";
    const std::pair<uint32_t, std::string_view> nccl_names[] = {{kNcclName, nccl_name}};
    ASSERT_TRUE(writer.write_strings(nccl_names, 0));
    std::vector<Track> tracks = {{7, kThreadTrack, 0, -1, TrackType::kThread, 0, 0},
                                 {kWorld, kWorldTrack, kWorldName, -1, TrackType::kMpiComm, 0, 0}};
    if (in_split) tracks.push_back({kSplit, kSplitTrack, kSplitName, -1, TrackType::kMpiComm, 0, 0});
    tracks.push_back({kNccl, kNcclTrack, kNcclName, -1, TrackType::kNcclComm, 0, 0});
    ASSERT_TRUE(writer.write_tracks(tracks, 0));
    // Clocks measured exact within 10 ns, so that the merge checks causality.
    const SyncPoint points[2] = {{0, 0, 10}, {1'000'000'000, 0, 10}};
    ASSERT_TRUE(writer.write_sync_points(points, 0));
    ASSERT_TRUE(writer.write_events(events));
    Counters counters = ended;
    if (wrote_state) counters.set(counter::kHangDumps, 1);
    // A killed rank's shard has no end record, only what its launcher added.
    if (ended.get(counter::kKilledBySignal) != 0) ASSERT_TRUE(writer.write_counters(counters, 5'000));
    else ASSERT_TRUE(writer.close(counters, 10'000));
  }

  std::vector<Hang> hangs() { return find_hangs(Timeline(merged())); }

  // Ranks 0 and 1 entered allreduce #3 of the world; rank 2 is inside the
  // point-to-point call `call` (unfinished from 80 to 5000): what the hang
  // says of rank 2. Arguments as write_rank's.
  MissingRank inside_a_message_call(Event call, bool wrote_state, const Counters& ended = {}) {
    write_rank(0, {allreduce(kWorld, 3, 100, 5000, true)}, false);
    write_rank(1, {allreduce(kWorld, 3, 120, 5000, true)}, false);
    call.kind = EventKind::kMpiP2p;
    call.begin_ns = 80;
    call.end_ns = 5000;
    call.comm_hash = kWorld;
    write_rank(2, {unfinished(call)}, false, wrote_state, ended);
    const std::vector<Hang> found = hangs();
    EXPECT_EQ(found.size(), 1u);
    if (found.size() != 1 || found[0].missing.size() != 1) return {};
    return found[0].missing[0];
  }

  // Rank 2 ended inside a send to `peer` with tag 3, and wrote it as it
  // closed its shard, with `ended` among its counters.
  MissingRank ended_inside_a_send(int32_t peer, const Counters& ended) {
    Event send = event(EventKind::kMpiP2p, kSend, 0, 0);
    send.op = CommOp::kSend;
    send.peer = peer;
    send.correlation_id = 3;
    return inside_a_message_call(send, false, ended);
  }
};

// Ranks 0 and 1 entered allreduce #3 of the world at 100 and 120 and wrote
// their state at 5000; rank 2 left a barrier at 90 and is inside "late work".
TEST_F(HangsTest, NamesTheRanksInsideAndWhatTheMissingOneWasDoing) {
  write_rank(0, {allreduce(kWorld, 3, 100, 5000, true)}, false);
  write_rank(1, {allreduce(kWorld, 3, 120, 5000, true)}, false);
  write_rank(2, {event(EventKind::kMpiCollective, kBarrier, 50, 90), unfinished(event(EventKind::kNvtxRange, kLateWork, 95, 5100))},
             false);
  const std::vector<Hang> found = hangs();
  ASSERT_EQ(found.size(), 1u);
  const Hang& h = found[0];
  EXPECT_EQ(h.call, "MPI_Allreduce");
  EXPECT_EQ(h.comm, "MPI_COMM_WORLD");
  EXPECT_EQ(h.seq, 3u);
  ASSERT_EQ(h.entered.size(), 2u);
  EXPECT_EQ(h.entered[0].rank, 0);
  EXPECT_EQ(h.entered[0].since_ns, 100);
  EXPECT_EQ(h.entered[0].waited_ns, 4900);
  EXPECT_EQ(h.entered[1].rank, 1);
  EXPECT_EQ(h.missing_ranks, std::vector<int32_t>{2});
  EXPECT_TRUE(h.members_known);
  ASSERT_EQ(h.missing.size(), 1u);
  const MissingRank& m = h.missing[0];
  EXPECT_TRUE(m.wrote_state);
  EXPECT_EQ(m.inside, "");
  EXPECT_EQ(m.open_ranges, std::vector<std::string>{"late work"});
  EXPECT_EQ(m.last_call, "MPI_Barrier");
  EXPECT_EQ(m.last_call_end_ns, 90);
  EXPECT_EQ(m.entered_at_ns, 0);
  EXPECT_EQ(describe_hang(h),
            "HANG: MPI_Allreduce #3 of MPI_COMM_WORLD: ranks 0,1 inside, up to 4.9 µs; had not entered: rank 2\n"
            "  rank 2 (complete, wrote its state): in no collective; in ranges late work; last call MPI_Barrier ended "
            "4.91 µs before the state was written\n");
}

// A communicator's members are the ranks with its track: rank 2 never made
// kSplit, so only rank 1 is missing, and the size in its name says one
// member is not known.
TEST_F(HangsTest, MembersAreTheRanksThatMadeTheCommunicator) {
  write_rank(0, {allreduce(kSplit, 0, 100, 3000, true)}, true);
  Event receive = unfinished(event(EventKind::kMpiP2p, kRecv, 80, 3000));
  receive.op = CommOp::kRecv;
  receive.comm_hash = kWorld;
  receive.peer = 2;
  receive.correlation_id = 7;
  write_rank(1, {receive}, true);
  write_rank(2, {}, false);
  const std::vector<Hang> found = hangs();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].comm, "MPI comm 99 (3 ranks)");
  EXPECT_EQ(found[0].missing_ranks, std::vector<int32_t>{1});
  EXPECT_FALSE(found[0].members_known);
  ASSERT_EQ(found[0].missing.size(), 1u);
  EXPECT_EQ(found[0].missing[0].inside, "MPI_Recv from rank 2, tag 7");
}

// Rank 2 waits for a message from any rank with any tag (MPI_ANY_TAG, -1,
// kept as the p2p event's correlation id).
TEST_F(HangsTest, AReceiveFromAnyRankWithAnyTagSaysSo) {
  Event receive = event(EventKind::kMpiP2p, kRecv, 0, 0);
  receive.op = CommOp::kRecv;
  receive.peer = kNoPeer;
  receive.correlation_id = static_cast<uint32_t>(-1);
  EXPECT_EQ(inside_a_message_call(receive, true).inside, "MPI_Recv from any rank, any tag");
}

// Rank 2 was ended by its MPI inside a send to a rank that does not exist
// (MPI_ERRORS_ARE_FATAL ends a process with _exit).
TEST_F(HangsTest, ARankEndedByExitShowsAsAbortedInsideTheCallItDiedIn) {
  Counters ended;
  ended.set(counter::kEndedByExitCall, 1);
  ended.set(counter::kExitStatus, 6);
  const MissingRank m = ended_inside_a_send(kNoPeer, ended);
  EXPECT_EQ(m.status, "aborted");
  EXPECT_TRUE(m.wrote_state);
  EXPECT_EQ(m.inside, "MPI_Send to a rank not in the communicator, tag 3");
}

// Rank 2 was ended by mpirun's SIGTERM inside a send to rank 0.
TEST_F(HangsTest, ARankEndedByASignalShowsAsTerminatedInsideItsCall) {
  Counters ended;
  ended.set(counter::kTerminatedBySignal, 15);
  const MissingRank m = ended_inside_a_send(0, ended);
  EXPECT_EQ(m.status, "terminated");
  EXPECT_TRUE(m.wrote_state);
  EXPECT_EQ(m.inside, "MPI_Send to rank 0, tag 3");
}

// The OOM killer killed rank 2 at work, while ranks 0 and 1 waited in an
// allreduce; its launcher recorded the signal, the kill and its peak memory.
TEST_F(HangsTest, ARankKilledByTheOomKillerIsNamedSo) {
  write_rank(0, {allreduce(kWorld, 3, 100, 5000, true)}, false);
  write_rank(1, {allreduce(kWorld, 3, 120, 5000, true)}, false);
  Counters killed;
  killed.set(counter::kKilledBySignal, 9);
  killed.set(counter::kOomKills, 1);
  killed.set(counter::kProcessPeakRssBytes, 3ull << 30);
  write_rank(2, {event(EventKind::kMpiCollective, kBarrier, 50, 90)}, false, false, killed);
  const std::vector<Hang> found = hangs();
  ASSERT_EQ(found.size(), 1u);
  ASSERT_EQ(found[0].missing.size(), 1u);
  const MissingRank& m = found[0].missing[0];
  EXPECT_EQ(m.status, "dead");
  EXPECT_FALSE(m.wrote_state);
  const std::string kill =
      "killed by SIGKILL (signal 9) before its shard was closed; the kernel's OOM killer killed 1 process of its memory "
      "cgroup meanwhile; peak memory 3 GiB";
  EXPECT_EQ(m.killed, kill);
  EXPECT_NE(describe_hang(found[0]).find("rank 2 (dead, " + kill + ", state not written)"), std::string::npos)
      << describe_hang(found[0]);

  const Timeline timeline(merged());
  const std::vector<RankEnd> ends = rank_ends(timeline);
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(ends[2].killed_by_signal, 9);
  EXPECT_EQ(describe_fatal_signal(ends[0]), "");
  EXPECT_EQ(peak_memory_summary(ends), "peak memory per rank: median 3 GiB, largest 3 GiB (rank 2) of the 1 rank that recorded it");
  const std::string text = report_text(make_report(timeline));
  EXPECT_NE(text.find("KILLED: rank 2 " + kill + "\n"), std::string::npos) << text;
}

// Rank 2 crashed (a null-pointer write) inside a send to rank 0; its agent
// closed the shard first, with the call it was inside and what the kernel said.
TEST_F(HangsTest, ARankThatCrashedIsNamedWithTheSignalTheAddressAndTheThread) {
  Counters crashed;
  crashed.set(counter::kCrashSignal, SIGSEGV);
  crashed.set(counter::kCrashSignalCode, SEGV_MAPERR);
  crashed.set(counter::kCrashAddress, 0);
  crashed.set(counter::kCrashThread, 4242);
  const MissingRank m = ended_inside_a_send(0, crashed);
  EXPECT_EQ(m.status, "crashed");
  EXPECT_TRUE(m.wrote_state);
  EXPECT_EQ(m.inside, "MPI_Send to rank 0, tag 3");
  const std::string crash =
      "crashed with SIGSEGV (signal 11: address not mapped) at 0x0 on thread 4242; its shard was closed first, with "
      "the calls it was inside";
  EXPECT_EQ(m.killed, crash);

  const Timeline timeline(merged());
  const std::vector<RankEnd> ends = rank_ends(timeline);
  ASSERT_TRUE(ends[2].crash);
  EXPECT_EQ(ends[2].killed_by_signal, 0);
  EXPECT_EQ(ends[2].crash->thread, 4242u);
  EXPECT_FALSE(ends[0].crash);
  const std::string text = report_text(make_report(timeline));
  EXPECT_NE(text.find("CRASHED: rank 2 " + crash + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 2 (" + crash + ", wrote its state)"), std::string::npos) << text;
}

// What the kernel's reasons and the signals sent by a process read as.
TEST(RankEnds, ACrashIsDescribedByItsSignalAndTheKernelsReason) {
  const auto described = [](int signal_number, int code, uint64_t address, int64_t sender = 0, std::string where = "") {
    RankEnd end;
    end.status = RankStatus::kCrashed;
    Crash& crash = end.crash.emplace();
    crash.signal = signal_number, crash.code = code, crash.address = address;
    crash.sender_pid = sender, crash.sent_by_itself = sender == 77;
    crash.where = std::move(where);
    const std::string text = describe_fatal_signal(end);
    return text.substr(0, text.find(';'));
  };
  EXPECT_EQ(described(SIGABRT, 0, 0, 77), "crashed with SIGABRT (signal 6: abort(), from an assert, std::terminate or the program itself)");
  EXPECT_EQ(described(SIGABRT, 0, 0, 1234), "crashed with SIGABRT (signal 6: sent by process 1234)");
  EXPECT_EQ(described(SIGSEGV, 0, 0), "crashed with SIGSEGV (signal 11: sent by a process)");
  // Python's faulthandler reports the fault, then raises the signal again.
  EXPECT_EQ(described(SIGSEGV, 0, 0, 77),
            "crashed with SIGSEGV (signal 11: raised by the process itself, by raise() or a handler passing a fault on, "
            "so the address is not known)");
  // A wild (non-canonical) pointer on x86: the kernel gives no address, and 0 is not one.
  EXPECT_EQ(described(SIGSEGV, SI_KERNEL, 0),
            "crashed with SIGSEGV (signal 11: general protection fault, a wild pointer, at an address not known)");
  EXPECT_EQ(described(SIGSEGV, SEGV_MAPERR, 0, 0, "crash_app+0x12a4 (write_through_null+0x8)"),
            "crashed with SIGSEGV (signal 11: address not mapped) at 0x0 in crash_app+0x12a4 (write_through_null+0x8)");
  // Where the code is known, the instruction's address says nothing more.
  EXPECT_EQ(described(SIGFPE, FPE_INTDIV, 0x401000, 0, "crash_app+0x1000"),
            "crashed with SIGFPE (signal 8: integer divide by zero) in crash_app+0x1000");
  EXPECT_EQ(described(SIGSEGV, SEGV_ACCERR, 0x1000), "crashed with SIGSEGV (signal 11: no permission for the address) at 0x1000");
  EXPECT_EQ(described(SIGBUS, BUS_ADRERR, 0x7f00),
            "crashed with SIGBUS (signal 7: no memory behind the address (a mapped file cut short, /dev/shm full)) at 0x7f00");
  EXPECT_EQ(described(SIGFPE, FPE_INTDIV, 0x401000), "crashed with SIGFPE (signal 8: integer divide by zero) at instruction 0x401000");
  EXPECT_EQ(described(SIGILL, ILL_ILLOPN, 0x401000), "crashed with SIGILL (signal 4: illegal operand) at instruction 0x401000");
  // A reason this version does not know is left out, not guessed.
  EXPECT_EQ(described(SIGSEGV, 99, 0x10), "crashed with SIGSEGV (signal 11) at 0x10");
}

// A crash the agent never caught (under a handler the program set first, or
// before the agent's were in place): only its launcher saw the signal, yet
// the rank is named as crashed, not killed.
TEST_F(HangsTest, ACrashOnlyTheLauncherSawIsNamedACrash) {
  write_rank(0, {allreduce(kWorld, 3, 100, 5000, true)}, false);
  write_rank(1, {allreduce(kWorld, 3, 120, 5000, true)}, false);
  Counters seen_by_launcher;
  seen_by_launcher.set(counter::kKilledBySignal, SIGSEGV);
  write_rank(2, {event(EventKind::kMpiCollective, kBarrier, 50, 90)}, false, false, seen_by_launcher);
  const Timeline timeline(merged());
  const std::vector<RankEnd> ends = rank_ends(timeline);
  EXPECT_TRUE(ends[2].crashed());
  EXPECT_FALSE(ends[2].crash);
  EXPECT_FALSE(ends[0].crashed());
  const std::string crash =
      "crashed with SIGSEGV (signal 11) before its shard was closed, where its capture could not catch the crash";
  EXPECT_EQ(describe_fatal_signal(ends[2]), crash);
  const std::string text = report_text(make_report(timeline));
  EXPECT_NE(text.find("CRASHED: rank 2 " + crash + "\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("KILLED:"), std::string::npos) << text;
}

// A rank whose shard was closed is not a killed one, whatever its counters say.
TEST_F(HangsTest, OnlyADeadRankIsKilled) {
  Counters closed;
  closed.set(counter::kTerminatedBySignal, 15);
  closed.set(counter::kProcessPeakRssBytes, 1 << 20);
  write_rank(0, {allreduce(kWorld, 3, 100, 5000, true)}, false, true, closed);
  write_rank(1, {allreduce(kWorld, 3, 120, 5000, true)}, false);
  write_rank(2, {allreduce(kWorld, 3, 130, 5000, true)}, false);
  const std::vector<RankEnd> ends = rank_ends(Timeline(merged()));
  EXPECT_EQ(ends[0].killed_by_signal, 0);
  ASSERT_TRUE(ends[0].usage);
  EXPECT_EQ(ends[0].usage->peak_rss_bytes, 1u << 20);
  EXPECT_FALSE(ends[1].usage);
}

// The stall passed (--hang-action report): rank 2 entered at 6000, after the
// state was written, and its last call before that is the barrier; the
// finished instances are left to the profile, which matches #3 on all ranks,
// and to the merge's causality check, which finds nothing broken (the
// unfinished copies end at 5000, before rank 2 entered).
TEST_F(HangsTest, ARankThatCameLaterIsDatedAndTheCollectiveIsMatchedOnce) {
  write_rank(0, {allreduce(kWorld, 3, 100, 5000, true), allreduce(kWorld, 3, 100, 6100, false)}, false);
  write_rank(1, {allreduce(kWorld, 3, 120, 5000, true), allreduce(kWorld, 3, 120, 6100, false)}, false);
  write_rank(2, {event(EventKind::kMpiCollective, kBarrier, 50, 90), allreduce(kWorld, 3, 6000, 6100, false)}, false);
  const std::vector<Hang> found = hangs();
  ASSERT_EQ(found.size(), 1u);
  ASSERT_EQ(found[0].missing.size(), 1u);
  EXPECT_EQ(found[0].missing[0].entered_at_ns, 6000);
  EXPECT_EQ(found[0].missing[0].last_call, "MPI_Barrier");
  const Timeline timeline((dir_ / "job.h5").string());
  ASSERT_TRUE(timeline.clock_corrected());
  const JobProfile job = build_profile(timeline);
  ASSERT_EQ(job.collectives.size(), 1u);
  EXPECT_EQ(job.collectives[0].ranks.size(), 3u);
  for (const RankInfo& info : timeline.ranks()) EXPECT_EQ(info.counters.get(counter::kClockViolations), 0u) << info.rank;
}

// Rank 2 was held by SIGSTOP while ranks 0 and 1 waited for it and wrote
// their state at 5000; continued just before the job was ended, it entered
// the collective at 9000, after they had left, and was ended inside it. It
// was missing from their wait all the same.
TEST_F(HangsTest, ARankThatEnteredOnlyAfterTheOthersLeftWasMissing) {
  Counters closed;
  closed.set(counter::kTerminatedBySignal, 15);
  write_rank(0, {allreduce(kWorld, 3, 100, 5000, true)}, false);
  write_rank(1, {allreduce(kWorld, 3, 120, 5000, true)}, false);
  write_rank(2, {event(EventKind::kMpiCollective, kBarrier, 50, 90), allreduce(kWorld, 3, 9000, 9001, true)}, false,
             false, closed);
  const std::vector<Hang> found = hangs();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].missing_ranks, std::vector<int32_t>({2}));
  ASSERT_EQ(found[0].entered.size(), 2u);
  ASSERT_EQ(found[0].missing.size(), 1u);
  EXPECT_EQ(found[0].missing[0].entered_at_ns, 9000);
  EXPECT_EQ(found[0].missing[0].inside, "");
  EXPECT_EQ(found[0].missing[0].last_call, "MPI_Barrier");
  EXPECT_NE(describe_hang(found[0]).find("had not entered: rank 2"), std::string::npos) << describe_hang(found[0]);
}

// Two ranks that entered one after the other while the first still waited
// both waited: neither is taken for missing.
TEST_F(HangsTest, ARankThatEnteredWhileAnotherWaitedIsInside) {
  write_rank(0, {allreduce(kWorld, 3, 100, 5000, true)}, false);
  write_rank(1, {allreduce(kWorld, 3, 4000, 5000, true)}, false);
  write_rank(2, {allreduce(kWorld, 3, 4500, 5000, true)}, false);
  const std::vector<Hang> found = hangs();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].entered.size(), 3u);
  EXPECT_TRUE(found[0].missing_ranks.empty());
}

// Ranks 1 and 2 were both held while rank 0 waited and wrote its state at
// 5000; both entered after it: both were missing.
TEST_F(HangsTest, SeveralRanksThatEnteredAfterTheOthersLeftWereMissing) {
  write_rank(0, {allreduce(kWorld, 3, 100, 5000, true)}, false);
  write_rank(1, {allreduce(kWorld, 3, 9000, 9600, true)}, false);
  write_rank(2, {allreduce(kWorld, 3, 9010, 9600, true)}, false);
  const std::vector<Hang> found = hangs();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].missing_ranks, std::vector<int32_t>({1, 2}));
  ASSERT_EQ(found[0].missing.size(), 2u);
  EXPECT_EQ(found[0].missing[0].entered_at_ns, 9000);
  EXPECT_EQ(found[0].missing[1].entered_at_ns, 9010);
}

// Rank 2 never came. Rank 1, busy at the dump, entered after rank 0 wrote
// its state, and waited with it until the job ended: it is inside, and
// rank 2 alone is missing.
TEST_F(HangsTest, ARankThatNeverCameLeavesTheLateOnesInside) {
  write_rank(0, {allreduce(kWorld, 3, 100, 5000, true)}, false);
  write_rank(1, {allreduce(kWorld, 3, 6000, 9000, true)}, false);
  write_rank(2, {event(EventKind::kMpiCollective, kBarrier, 50, 90)}, false);
  const std::vector<Hang> found = hangs();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].entered.size(), 2u);
  EXPECT_EQ(found[0].missing_ranks, std::vector<int32_t>({2}));
  EXPECT_EQ(found[0].missing[0].entered_at_ns, 0);
}

// Copies cut at their begin as the ranks ended waited no time: a later
// begin is no later arrival after the others left.
TEST_F(HangsTest, WaitsOfNoLengthTakeNoRankForLate) {
  write_rank(0, {allreduce(kWorld, 3, 100, 100, true)}, false);
  write_rank(1, {allreduce(kWorld, 3, 120, 120, true)}, false);
  write_rank(2, {allreduce(kWorld, 3, 130, 130, true)}, false);
  const std::vector<Hang> found = hangs();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].entered.size(), 3u);
  EXPECT_TRUE(found[0].missing_ranks.empty());
}

TEST_F(HangsTest, AJobThatEndedWellHasNone) {
  write_rank(0, {allreduce(kWorld, 0, 100, 200, false)}, false, false);
  write_rank(1, {allreduce(kWorld, 0, 100, 200, false)}, false, false);
  write_rank(2, {allreduce(kWorld, 0, 100, 200, false)}, false, false);
  EXPECT_TRUE(hangs().empty());
  EXPECT_TRUE(find_deadlocks(Timeline(merged())).empty());
}

// A message call its rank was inside of when it wrote its state, from `begin` to 5000.
Event waiting(uint32_t name, CommOp op, int32_t peer, int64_t begin) {
  Event e = unfinished(event(EventKind::kMpiP2p, name, begin, 5000));
  e.op = op;
  e.comm_hash = kWorld;
  e.peer = peer;
  e.correlation_id = 5;
  return e;
}

// Rank 0 receives from rank 2, rank 2 sends to rank 1 (a message too large
// to go eagerly), rank 1 receives from rank 0: none can go on. Read from
// the lowest rank; no collective was left unfinished.
TEST_F(HangsTest, RanksEachWaitingForTheNextAreADeadlock) {
  write_rank(0, {waiting(kRecv, CommOp::kRecv, 2, 100)}, false);
  write_rank(1, {event(EventKind::kMpiCollective, kBarrier, 50, 90), waiting(kRecv, CommOp::kRecv, 0, 300)}, false);
  write_rank(2, {waiting(kSend, CommOp::kSend, 1, 200)}, false);
  const Timeline timeline(merged());
  EXPECT_TRUE(find_hangs(timeline).empty());
  const std::vector<Deadlock> found = find_deadlocks(timeline);
  ASSERT_EQ(found.size(), 1u);
  ASSERT_EQ(found[0].waits.size(), 3u);
  const std::vector<std::pair<int32_t, int32_t>> edges = {{0, 2}, {2, 1}, {1, 0}};
  for (size_t i = 0; i < edges.size(); ++i) {
    EXPECT_EQ(found[0].waits[i].rank, edges[i].first) << i;
    EXPECT_EQ(found[0].waits[i].peer, edges[i].second) << i;
  }
  EXPECT_EQ(found[0].waits[1].inside, "MPI_Send to rank 1, tag 5");
  EXPECT_EQ(found[0].waits[1].since_ns, 200);
  EXPECT_EQ(found[0].waits[1].waited_ns, 4800);
  EXPECT_EQ(describe_deadlock(found[0]),
            "DEADLOCK: ranks 0 > 2 > 1 > 0 each wait for the next, up to 4.9 µs\n"
            "  rank 0: inside MPI_Recv from rank 2, tag 5 for 4.9 µs\n"
            "  rank 2: inside MPI_Send to rank 1, tag 5 for 4.8 µs\n"
            "  rank 1: inside MPI_Recv from rank 0, tag 5 for 4.7 µs\n");
}

// Rank 0 waits for rank 1, which waits for rank 2, which is at work (in no
// call); a receive from any rank waits for no one in particular: no cycle.
TEST_F(HangsTest, AChainThatEndsInARankAtWorkIsNoDeadlock) {
  write_rank(0, {waiting(kRecv, CommOp::kRecv, 1, 100)}, false);
  write_rank(1, {waiting(kRecv, CommOp::kRecv, 2, 100)}, false);
  write_rank(2, {event(EventKind::kMpiCollective, kBarrier, 50, 90), unfinished(event(EventKind::kNvtxRange, kLateWork, 95, 5000))},
             false);
  EXPECT_TRUE(find_deadlocks(Timeline(merged())).empty());
}

TEST_F(HangsTest, AReceiveFromAnyRankClosesNoCycle) {
  write_rank(0, {waiting(kRecv, CommOp::kRecv, 1, 100)}, false);
  write_rank(1, {waiting(kRecv, CommOp::kRecv, kNoPeer, 100)}, false);
  write_rank(2, {waiting(kRecv, CommOp::kRecv, 2, 100)}, false);
  const std::vector<Deadlock> found = find_deadlocks(Timeline(merged()));
  ASSERT_EQ(found.size(), 1u) << "rank 2 waits for itself, a cycle of one";
  ASSERT_EQ(found[0].waits.size(), 1u);
  EXPECT_EQ(found[0].waits[0].rank, 2);
}

// Rank 0 polls with MPI_Test for a message from rank 1, at its own work
// between the polls; rank 1 is inside an MPI_Recv from rank 0: a deadlock
// all the same, and the poll says that it polls.
TEST_F(HangsTest, ARankPollingForAMessageWaitsForItToo) {
  Event polling = waiting(kTest, CommOp::kRecv, 1, 100);
  polling.flags |= kFlagPolling;
  write_rank(0, {polling}, false);
  write_rank(1, {waiting(kRecv, CommOp::kRecv, 0, 300)}, false);
  write_rank(2, {}, false);
  const std::vector<Deadlock> found = find_deadlocks(Timeline(merged()));
  ASSERT_EQ(found.size(), 1u);
  ASSERT_EQ(found[0].waits.size(), 2u);
  EXPECT_EQ(found[0].waits[0].inside, "MPI_Test from rank 1, tag 5 (polling)");
  EXPECT_EQ(found[0].waits[1].inside, "MPI_Recv from rank 0, tag 5");
}

// A NCCL send's or receive's kernel running on the GPU when its rank wrote
// its state, from `begin` to 5000; `peer` is the other side's world rank,
// kept as NCCL gives it, its rank in the communicator.
Event nccl_waiting(uint32_t name, CommOp op, int32_t peer, uint64_t seq, int64_t begin) {
  Event e = unfinished(testing::host_event(EventKind::kNcclP2pGpu, name, begin, 5000, kNcclTrack));
  e.op = op;
  e.comm_hash = kNccl;
  e.peer = nccl_rank_of(peer);
  e.seq = seq;
  return e;
}

// The host's half of a NCCL send or receive, enqueued from `begin` for 10 ns.
Event nccl_enqueued(uint32_t name, CommOp op, int32_t peer, uint64_t seq, int64_t begin) {
  Event e = event(EventKind::kNcclP2pEnqueue, name, begin, begin + 10);
  e.op = op;
  e.comm_hash = kNccl;
  e.peer = nccl_rank_of(peer);
  e.seq = seq;
  return e;
}

// The kernel of a NCCL send or receive that ran from `begin` for 10 ns.
Event nccl_ran(uint32_t name, CommOp op, int32_t peer, uint64_t seq, int64_t begin) {
  Event e = nccl_waiting(name, op, peer, seq, begin);
  e.flags = 0;
  e.end_ns = begin + 10;
  return e;
}

// Rank 1's receive #3 from rank 0 waits on its GPU; rank 0 left an
// all-reduce at 60 and is at work. One hang of rank 1 on rank 0 alone,
// named by world ranks, in the communicator's own name.
TEST_F(HangsTest, ANcclReceiveWaitingForItsPeerIsAHangOnThatPeer) {
  Event last = event(EventKind::kNcclCollectiveEnqueue, kNcclAllreduce, 50, 60);
  last.op = CommOp::kAllReduce;
  last.comm_hash = kNccl;
  write_rank(0, {last, unfinished(event(EventKind::kNvtxRange, kLateWork, 70, 5000))}, false);
  // The kernel's window is written once more as the rank ends, cut at its begin.
  Event cut = nccl_waiting(kNcclRecv, CommOp::kRecv, 0, 3, 100);
  cut.end_ns = cut.begin_ns;
  write_rank(1,
             {nccl_enqueued(kNcclRecv, CommOp::kRecv, 0, 3, 90), nccl_waiting(kNcclRecv, CommOp::kRecv, 0, 3, 100), cut},
             false);
  write_rank(2, {}, false);
  const Timeline timeline(merged());
  EXPECT_TRUE(find_deadlocks(timeline).empty());
  const std::vector<Hang> found = find_hangs(timeline);
  ASSERT_EQ(found.size(), 1u);
  const Hang& h = found[0];
  EXPECT_TRUE(h.point_to_point);
  EXPECT_EQ(h.peer, 0);
  EXPECT_EQ(h.comm, "NCCL pp (3 ranks)");
  ASSERT_EQ(h.entered.size(), 1u);
  EXPECT_EQ(h.entered[0].rank, 1);
  EXPECT_EQ(h.missing_ranks, std::vector<int32_t>{0});
  EXPECT_TRUE(h.members_known);
  EXPECT_EQ(describe_hang(h),
            "HANG: ncclRecv #3 from rank 0 of NCCL pp (3 ranks): rank 1 inside, up to 4.9 µs; rank 0 had not begun the "
            "matching send\n"
            "  rank 0 (complete, wrote its state): in no collective; in ranges late work; last call ncclAllReduce ended "
            "4.94 µs before the state was written\n");
}

// Rank 0 waits to send #3 to rank 2, which receives from rank 1 instead;
// rank 2 began that receive from rank 0 later after all (--hang-action
// report): its kernel, not the call that enqueued it, is when, and not the
// kernels of its receives #2 from rank 0 and #3 from rank 1.
TEST_F(HangsTest, ThePeerOfANcclSendIsDatedByTheMatchingReceivesKernelAlone) {
  write_rank(0, {nccl_waiting(kNcclSend, CommOp::kSend, 2, 3, 100)}, false);
  write_rank(1, {}, false);
  write_rank(2,
             {nccl_enqueued(kNcclRecv, CommOp::kRecv, 0, 2, 40), nccl_ran(kNcclRecv, CommOp::kRecv, 0, 2, 45),
              nccl_waiting(kNcclRecv, CommOp::kRecv, 1, 3, 150), nccl_enqueued(kNcclRecv, CommOp::kRecv, 1, 3, 6000),
              nccl_enqueued(kNcclRecv, CommOp::kRecv, 0, 3, 7000), nccl_ran(kNcclRecv, CommOp::kRecv, 0, 3, 7100)},
             false);
  const std::vector<Hang> found = hangs();
  ASSERT_EQ(found.size(), 2u) << "rank 0 on rank 2, and rank 2 on rank 1";
  const Hang& send = found[0];
  EXPECT_EQ(send.call, "ncclSend");
  EXPECT_EQ(send.peer, 2);
  ASSERT_EQ(send.missing.size(), 1u);
  EXPECT_EQ(send.missing[0].inside, "ncclRecv from rank 1");
  EXPECT_EQ(send.missing[0].entered_at_ns, 7100);
  EXPECT_EQ(found[1].entered[0].rank, 2);
  EXPECT_EQ(found[1].peer, 1);
  ASSERT_EQ(found[1].missing.size(), 1u);
  EXPECT_EQ(found[1].missing[0].entered_at_ns, 0) << "rank 1 never sent";
  EXPECT_EQ(describe_hang(send).substr(0, describe_hang(send).find('\n')),
            "HANG: ncclSend #3 to rank 2 of NCCL pp (3 ranks): rank 0 inside, up to 4.9 µs; rank 2 had not begun the "
            "matching receive");
}

// A peer that enqueued the matching receive, its kernel held back behind
// its own receive that waits, had not begun it.
TEST_F(HangsTest, APeerThatOnlyEnqueuedTheOtherHalfHadNotBegunIt) {
  write_rank(0, {nccl_waiting(kNcclSend, CommOp::kSend, 1, 2, 100)}, false);
  write_rank(1, {nccl_waiting(kNcclRecv, CommOp::kRecv, 2, 2, 90), nccl_enqueued(kNcclRecv, CommOp::kRecv, 0, 2, 95)},
             false);
  write_rank(2, {}, false);
  const std::vector<Hang> found = hangs();
  const auto send = std::find_if(found.begin(), found.end(), [](const Hang& h) { return h.entered[0].rank == 0; });
  ASSERT_NE(send, found.end());
  ASSERT_EQ(send->missing.size(), 1u);
  EXPECT_EQ(send->missing[0].entered_at_ns, 0);
  EXPECT_EQ(send->missing[0].inside, "ncclRecv from rank 2");
  EXPECT_EQ(send->missing[0].last_call, "ncclRecv");
}

// Rank 0's send #3 to rank 1 and rank 1's receive #3 from rank 0 both run
// (a link that stalled): neither waits for the other to come, so they are
// one hang with both inside, and no deadlock; rank 2, receiving from rank 1,
// waits for rank 1, which is inside that receive.
TEST_F(HangsTest, ASendAndItsReceiveBothRunningAreATransferThatDidNotComplete) {
  write_rank(0, {nccl_waiting(kNcclSend, CommOp::kSend, 1, 3, 100)}, false);
  Event cut = nccl_waiting(kNcclRecv, CommOp::kRecv, 0, 3, 200);
  cut.end_ns = cut.begin_ns;
  write_rank(1, {nccl_waiting(kNcclRecv, CommOp::kRecv, 0, 3, 200), cut}, false);
  write_rank(2, {nccl_waiting(kNcclRecv, CommOp::kRecv, 1, 3, 300)}, false);
  const Timeline timeline(merged());
  EXPECT_TRUE(find_deadlocks(timeline).empty());
  const std::vector<Hang> found = find_hangs(timeline);
  ASSERT_EQ(found.size(), 2u);
  const Hang& transfer = found[0];
  EXPECT_EQ(transfer.call, "ncclSend");
  EXPECT_EQ(transfer.peer, 1);
  ASSERT_EQ(transfer.entered.size(), 2u);
  EXPECT_EQ(transfer.entered[0].rank, 0);
  EXPECT_EQ(transfer.entered[1].rank, 1);
  EXPECT_EQ(transfer.entered[1].since_ns, 200);
  EXPECT_EQ(transfer.entered[1].waited_ns, 4800) << "the receive's longer copy";
  EXPECT_TRUE(transfer.missing_ranks.empty());
  EXPECT_EQ(describe_hang(transfer),
            "HANG: ncclSend #3 to rank 1 of NCCL pp (3 ranks): ranks 0,1 inside, up to 4.9 µs; rank 1 is inside the "
            "matching receive: the transfer itself did not complete\n");
  const Hang& waiting_for_one = found[1];
  EXPECT_EQ(waiting_for_one.entered[0].rank, 2);
  EXPECT_EQ(waiting_for_one.missing_ranks, std::vector<int32_t>{1});
  EXPECT_EQ(waiting_for_one.missing[0].inside, "ncclRecv from rank 0");
}

// Every rank's grouped send to the next and receive from the one before
// run together, none ending: transfers that did not complete, no deadlock.
TEST_F(HangsTest, ARingOfRunningTransfersIsNoDeadlock) {
  for (int32_t r = 0; r < 3; ++r) {
    write_rank(r,
               {nccl_waiting(kNcclSend, CommOp::kSend, (r + 1) % 3, 4, 100 + r),
                nccl_waiting(kNcclRecv, CommOp::kRecv, (r + 2) % 3, 4, 100 + r)},
               false);
  }
  const Timeline timeline(merged());
  EXPECT_TRUE(find_deadlocks(timeline).empty());
  const std::vector<Hang> found = find_hangs(timeline);
  ASSERT_EQ(found.size(), 3u);
  for (const Hang& h : found) {
    EXPECT_EQ(h.call, "ncclSend");
    EXPECT_EQ(h.entered.size(), 2u);
    EXPECT_TRUE(h.missing_ranks.empty());
  }
  const auto from_two = std::find_if(found.begin(), found.end(), [](const Hang& h) { return h.entered[0].rank == 2; });
  ASSERT_NE(from_two, found.end());
  EXPECT_NE(describe_hang(*from_two).find(": ranks 0,2 inside,"), std::string::npos)
      << "the ranks inside in rank order, the sender's first in `entered` alone: " << describe_hang(*from_two);
}

// Rank 0's group sends to rank 1, whose receive runs, and receives from rank
// 2, which is inside an MPI_Recv from rank 0: the deadlock is 0 > 2 > 0, and
// rank 0's send, begun first, is the transfer with rank 1 that did not complete.
TEST_F(HangsTest, AGroupsWaitIsItsHalfWhosePeerHadNotBegun) {
  write_rank(0,
             {nccl_waiting(kNcclSend, CommOp::kSend, 1, 4, 100), nccl_waiting(kNcclRecv, CommOp::kRecv, 2, 4, 110)},
             false);
  write_rank(1, {nccl_waiting(kNcclRecv, CommOp::kRecv, 0, 4, 120)}, false);
  write_rank(2, {waiting(kRecv, CommOp::kRecv, 0, 300)}, false);
  const Timeline timeline(merged());
  const std::vector<Deadlock> deadlocks = find_deadlocks(timeline);
  ASSERT_EQ(deadlocks.size(), 1u);
  ASSERT_EQ(deadlocks[0].waits.size(), 2u);
  EXPECT_EQ(deadlocks[0].waits[0].rank, 0);
  EXPECT_EQ(deadlocks[0].waits[0].inside, "ncclRecv from rank 2");
  EXPECT_EQ(deadlocks[0].waits[1].rank, 2);
  const std::vector<Hang> found = find_hangs(timeline);
  ASSERT_EQ(found.size(), 1u) << "rank 0's receive is told in the deadlock alone";
  EXPECT_EQ(found[0].call, "ncclSend");
  EXPECT_EQ(found[0].entered.size(), 2u);
}

// Sends to two members not in the timeline, each its first to that peer
// (#0): two hangs, not one.
TEST_F(HangsTest, SendsToTwoPeersNotInTheTimelineAreTwoHangs) {
  Event to_three = nccl_waiting(kNcclSend, CommOp::kSend, 0, 0, 100), to_four = to_three;
  to_three.peer = 3;  // ranks in the communicator that no track names
  to_four.peer = 4;
  write_rank(0, {to_three, to_four}, false);
  write_rank(1, {}, false);
  write_rank(2, {}, false);
  const std::vector<Hang> found = hangs();
  ASSERT_EQ(found.size(), 2u);
  for (const Hang& h : found) {
    EXPECT_EQ(h.peer, kNoPeer);
    EXPECT_FALSE(h.members_known);
  }
}

// Ranks 0 and 1 each receive from the next on the GPU, rank 2 is inside an
// MPI_Recv from rank 0: one deadlock across NCCL and MPI, and no hang told
// twice for it.
TEST_F(HangsTest, NcclAndMpiWaitsCloseOneDeadlock) {
  write_rank(0, {nccl_waiting(kNcclRecv, CommOp::kRecv, 1, 4, 100)}, false);
  write_rank(1, {nccl_waiting(kNcclRecv, CommOp::kRecv, 2, 4, 200)}, false);
  write_rank(2, {waiting(kRecv, CommOp::kRecv, 0, 300)}, false);
  const Timeline timeline(merged());
  EXPECT_TRUE(find_hangs(timeline).empty());
  const std::vector<Deadlock> found = find_deadlocks(timeline);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(describe_deadlock(found[0]),
            "DEADLOCK: ranks 0 > 1 > 2 > 0 each wait for the next, up to 4.9 µs\n"
            "  rank 0: inside ncclRecv from rank 1 for 4.9 µs\n"
            "  rank 1: inside ncclRecv from rank 2 for 4.8 µs\n"
            "  rank 2: inside MPI_Recv from rank 0, tag 5 for 4.7 µs\n");
}

}  // namespace
}  // namespace rankscope::analysis
