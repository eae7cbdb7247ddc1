#include "rankscope/acceptance/measure.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <exception>
#include <functional>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>
#include <tuple>
#include <vector>

#include "gpu.h"
#include "rankscope/acceptance/retests.h"
#include "rankscope/model/format.h"
#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/model/error.h"
#include "rankscope/model/text.h"
#include "rankscope/model/version.h"
#include "rankscope/mpi_exchange/gather.h"

namespace rankscope::acceptance {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string first_value(const char* path, std::string_view key) {
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) {
    if (!line.starts_with(key)) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t begin = line.find_first_not_of(" \t", colon + 1);
    return begin == std::string::npos ? "" : line.substr(begin);
  }
  return "";
}



// Where nodes share cores, the scheduler may put both ends of the link being
// measured on one core and keep them there for whole repeats: each round trip
// then waits for a context switch (15-25 µs instead of 10 µs between test
// hosts) and each transfer gets half a core. For the measurement, each end
// holds a core of its own: the lower end the one it is on, the upper end
// another it may use. Nodes on machines of their own are only kept on one
// core for as long.
class CoresApart {
 public:
  CoresApart(MPI_Comm comm, int peer, bool lower) {
    constexpr int kTag = 32004;
    if (sched_getaffinity(0, sizeof(allowed_), &allowed_) != 0) return;
    int lower_core = -1;
    if (lower) {
      lower_core = sched_getcpu();
      MPI_Send(&lower_core, 1, MPI_INT, peer, kTag, comm);
      if (lower_core >= 0 && CPU_ISSET(lower_core, &allowed_)) hold(lower_core);
      return;
    }
    MPI_Recv(&lower_core, 1, MPI_INT, peer, kTag, comm, MPI_STATUS_IGNORE);
    const int current = sched_getcpu();
    if (current >= 0 && current != lower_core) {
      hold(current);
      return;
    }
    for (int core = 0; core < CPU_SETSIZE; ++core)
      if (core != lower_core && CPU_ISSET(core, &allowed_)) {
        hold(core);
        return;
      }
  }
  ~CoresApart() {
    if (held_) sched_setaffinity(0, sizeof(allowed_), &allowed_);
  }
  CoresApart(const CoresApart&) = delete;
  CoresApart& operator=(const CoresApart&) = delete;

 private:
  void hold(int core) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(core, &one);
    held_ = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  cpu_set_t allowed_{};
  bool held_ = false;
};

// One repeat between `peer` and this rank: the slower direction's bandwidth
// and half the shortest round trip of 8 bytes.
std::pair<double, double> measure_link(MPI_Comm comm, int peer, bool lower, const Level& level,
                                       std::vector<char>& buffer, RunTimeline& timeline) {
  constexpr int kTag = 32001;
  std::optional<CoresApart> apart;
  if (level.one_at_a_time) apart.emplace(comm, peer, lower);
  char small[8] = {};
  double shortest = 1e30;
  for (int i = 0; i < level.latency_exchanges + 10; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (lower) {
      MPI_Send(small, 8, MPI_CHAR, peer, kTag, comm);
      MPI_Recv(small, 8, MPI_CHAR, peer, kTag, comm, MPI_STATUS_IGNORE);
      if (i >= 10) shortest = std::min(shortest, seconds_since(start));
    } else {
      MPI_Recv(small, 8, MPI_CHAR, peer, kTag, comm, MPI_STATUS_IGNORE);
      MPI_Send(small, 8, MPI_CHAR, peer, kTag, comm);
    }
  }
  // Each direction: the bytes, then a byte back when they have all arrived.
  double slowest = 0;
  for (int direction = 0; direction < 2; ++direction) {
    const bool sending = (direction == 0) == lower;
    const auto start = std::chrono::steady_clock::now();
    const int64_t began = timeline.now();
    if (sending) {
      MPI_Send(buffer.data(), static_cast<int>(buffer.size()), MPI_CHAR, peer, kTag, comm);
      timeline.message(CommOp::kSend, peer, kTag, buffer.size(), began, timeline.now());
      MPI_Recv(small, 1, MPI_CHAR, peer, kTag, comm, MPI_STATUS_IGNORE);
      slowest = std::max(slowest, seconds_since(start));
    } else {
      MPI_Recv(buffer.data(), static_cast<int>(buffer.size()), MPI_CHAR, peer, kTag, comm, MPI_STATUS_IGNORE);
      timeline.message(CommOp::kRecv, peer, kTag, buffer.size(), began, timeline.now());
      MPI_Send(small, 1, MPI_CHAR, peer, kTag, comm);
    }
  }
  // Each end timed the direction it sent, and the lower end the round trips: both ends take the
  // slower direction (a transmitter or a fibre can fail one way only) and the shortest round trip.
  const double mine[2] = {slowest, shortest};
  double theirs[2] = {};
  MPI_Sendrecv(mine, 2, MPI_DOUBLE, peer, kTag, theirs, 2, MPI_DOUBLE, peer, kTag, comm, MPI_STATUS_IGNORE);
  const double slower = std::max(mine[0], theirs[0]), round_trip = std::min(mine[1], theirs[1]);
  return {slower > 0 ? static_cast<double>(buffer.size()) / slower / 1e9 : 0, round_trip / 2 * 1e6};
}

// One repeat of a ring test: this node sends `buffer` to the next node of
// `ring` and receives as much from the one before, at once, once every node
// of the ring is ready; its figure is the bytes over the time both took.
double measure_ring(MPI_Comm ring, const std::vector<int>& nodes, std::vector<char>& buffer,
                    std::vector<char>& received, RunTimeline& timeline) {
  constexpr int kTag = 32003;
  int position = 0, size = 1;
  MPI_Comm_rank(ring, &position);
  MPI_Comm_size(ring, &size);
  const int next = (position + 1) % size, before = (position + size - 1) % size;
  // Everyone idles to the barrier; but its sleeping waits leave them up to 0.2 ms apart, as long as a
  // transfer takes at 400 Gb/s, which a node that left early would count. MPI's own barrier, with
  // every node nearly there, lets them go within microseconds.
  clocksync::idle_barrier(ring);
  MPI_Barrier(ring);
  const auto start = std::chrono::steady_clock::now();
  const int64_t began = timeline.now();
  MPI_Sendrecv(buffer.data(), static_cast<int>(buffer.size()), MPI_CHAR, next, kTag, received.data(),
               static_cast<int>(received.size()), MPI_CHAR, before, kTag, ring, MPI_STATUS_IGNORE);
  const int64_t ended = timeline.now();
  const double seconds = seconds_since(start);
  timeline.message(CommOp::kSend, nodes[static_cast<size_t>(next)], kTag, buffer.size(), began, ended);
  timeline.message(CommOp::kRecv, nodes[static_cast<size_t>(before)], kTag, received.size(), began, ended);
  return static_cast<double>(buffer.size()) / seconds / 1e9;
}

// Rounds of `pairs` in which no node is in two pairs, in the order given.
std::vector<std::vector<std::pair<int, int>>> rounds_of(std::vector<std::pair<int, int>> pairs) {
  std::vector<std::vector<std::pair<int, int>>> rounds;
  while (!pairs.empty()) {
    std::vector<std::pair<int, int>> round, later;
    for (const auto& [a, b] : pairs) {
      const bool busy = std::any_of(round.begin(), round.end(), [a = a, b = b](const std::pair<int, int>& p) {
        return p.first == a || p.second == a || p.first == b || p.second == b;
      });
      (busy ? later : round).emplace_back(a, b);
    }
    rounds.push_back(round);
    pairs = later;
  }
  return rounds;
}

// A barrier through rank 0, so that rank 0 knows who has reached it: were
// the run cut short here, those who never answered are the lost. Each rank
// does `work` first; rank 0 does its own on a thread while it takes the
// answers, so that it knows who is silent even while it measures itself.
// Waiting ranks sleep (clocksync::wait_idle) instead of spinning.
void roll_call(MPI_Comm comm, RunRecord& record, const std::function<void()>& work) {
  constexpr int kTag = 32002;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (rank != 0) {
    if (work) work();
    MPI_Send(nullptr, 0, MPI_CHAR, 0, kTag, comm);
    MPI_Request release;
    MPI_Irecv(nullptr, 0, MPI_CHAR, 0, kTag, comm, &release);
    clocksync::wait_idle(release);
    return;
  }
  record.call_roll(size);
  std::vector<MPI_Request> calls(static_cast<size_t>(size - 1));
  for (int r = 1; r < size; ++r) MPI_Irecv(nullptr, 0, MPI_CHAR, r, kTag, comm, &calls[static_cast<size_t>(r - 1)]);
  std::atomic<bool> working{static_cast<bool>(work)};
  std::exception_ptr failure;
  std::thread worker;
  if (work)
    worker = std::thread([&] {
      try {
        work();
      } catch (...) {
        failure = std::current_exception();
      }
      working = false;
    });
  std::vector<int> done(calls.size());
  for (int waiting = size - 1; waiting > 0 || working;) {
    int count = 0;
    if (waiting > 0) MPI_Testsome(static_cast<int>(calls.size()), calls.data(), &count, done.data(), MPI_STATUSES_IGNORE);
    for (int i = 0; i < count; ++i) record.answered(done[static_cast<size_t>(i)] + 1);
    waiting -= count;
    if (count > 0) continue;
    if (working) {
      // Rarely enough not to disturb the measurement beside it.
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } else if (waiting > 0) {
      // Asleep on the first call still open, looking at the others now and then.
      const auto open = std::find_if(calls.begin(), calls.end(), [](MPI_Request r) { return r != MPI_REQUEST_NULL; });
      if (clocksync::wait_idle(*open, MPI_Wtime() + 0.01)) {
        record.answered(static_cast<int>(open - calls.begin()) + 1);
        --waiting;
      }
    }
  }
  if (worker.joinable()) worker.join();
  if (failure) std::rethrow_exception(failure);
  // A node that answered, then died, holds up the send to it.
  for (int r = 1; r < size; ++r) {
    record.waiting_on(r);
    MPI_Send(nullptr, 0, MPI_CHAR, r, kTag, comm);
  }
  record.waiting_on(-1);
}

// One `collective` on S = `bytes` of floats over the `ranks` ranks of `comm`.
void run_collective(std::string_view collective, size_t bytes, int ranks, std::vector<float>& send,
                    std::vector<float>& receive, MPI_Comm comm) {
  const int floats = static_cast<int>(bytes / sizeof(float)), share = floats / ranks;
  if (collective == "allreduce") MPI_Allreduce(send.data(), receive.data(), floats, MPI_FLOAT, MPI_SUM, comm);
  else if (collective == "allgather") MPI_Allgather(send.data(), share, MPI_FLOAT, receive.data(), share, MPI_FLOAT, comm);
  else if (collective == "reduce_scatter") MPI_Reduce_scatter_block(send.data(), receive.data(), share, MPI_FLOAT, MPI_SUM, comm);
  else if (collective == "alltoall") MPI_Alltoall(send.data(), share, MPI_FLOAT, receive.data(), share, MPI_FLOAT, comm);
  else throw Error("no collective named '" + std::string(collective) + "'");
}

// MPI's collectives over the ranks of `group`, one per node.
class MpiCollectives final : public CollectiveTransport {
 public:
  MpiCollectives(MPI_Comm group, const Level& level) : group_(group), level_(level) { MPI_Comm_size(group, &ranks_); }
  int ranks() const override { return ranks_; }

  std::vector<CollectivePoint> sweep(std::string_view collective) override {
    const std::vector<size_t> sizes = collective_sizes(collective, ranks_, level_);
    std::vector<float> send(sizes.back() / sizeof(float), 1.0f), receive(send.size());
    const size_t iterations = static_cast<size_t>(level_.collective_iterations);
    std::vector<double> mine(iterations), slowest(iterations);
    std::vector<CollectivePoint> points;
    for (size_t bytes : sizes) {
      // Back to back, as nccl-tests runs them (and as a training loop does):
      // a rank late out of one iteration makes the others wait in the next,
      // and the slowest rank's time holds that wait.
      for (int i = 0; i < level_.collective_warmup + level_.collective_iterations; ++i) {
        const auto start = std::chrono::steady_clock::now();
        run_collective(collective, bytes, ranks_, send, receive, group_);
        if (i >= level_.collective_warmup) mine[static_cast<size_t>(i - level_.collective_warmup)] = seconds_since(start) * 1e6;
      }
      MPI_Reduce(mine.data(), slowest.data(), level_.collective_iterations, MPI_DOUBLE, MPI_MAX, 0, group_);
      points.push_back({bytes, slowest});
    }
    return points;
  }

 private:
  MPI_Comm group_;
  const Level& level_;
  int ranks_ = 1;
};

}  // namespace

std::unique_ptr<CollectiveTransport> open_mpi_collectives(MPI_Comm group, const Level& level) {
  return std::make_unique<MpiCollectives>(group, level);
}

std::vector<CollectiveSweep> sweep_every_scale(MPI_Comm comm, const Level& level, const std::string& transport,
                                               const std::function<std::unique_ptr<CollectiveTransport>(MPI_Comm)>& open,
                                               const std::function<void(const std::string&)>& progress,
                                               std::string& unavailable) {
  if (level.collective_iterations < 1 || level.collective_warmup < 0) {
    throw Error("collectives need 1 or more timed iterations and no fewer than 0 warm-up ones, not " +
                std::to_string(level.collective_iterations) + " and " + std::to_string(level.collective_warmup));
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const auto say = [&](const std::string& line) {
    if (rank == 0) progress("collectives: " + line);
  };
  const std::string sizes_text = format_bytes(8) + " to " +
                                 format_bytes(static_cast<double>(level.collective_max_bytes));
  // Gathered to rank 0, a row per size: the collective's index in
  // kCollectives, the group's in node_groups() (-1: every node), the
  // collective's ranks, the size, then each iteration. Each group's rank 0
  // keeps its group's.
  std::vector<double> rows;
  const auto keep = [&](size_t collective, int group, int ranks, const std::vector<CollectivePoint>& points) {
    for (const CollectivePoint& point : points) {
      rows.insert(rows.end(), {static_cast<double>(collective), static_cast<double>(group), static_cast<double>(ranks),
                               static_cast<double>(point.bytes)});
      rows.insert(rows.end(), point.iteration_us.begin(), point.iteration_us.end());
    }
  };
  const auto opened = [&](MPI_Comm nodes) -> std::unique_ptr<CollectiveTransport> {
    try {
      return open(nodes);
    } catch (const TransportUnavailable& failure) {
      if (unavailable.empty()) unavailable = failure.what();
      return nullptr;
    }
  };
  // Every collective through `over`, kept as `group`'s (-1: every node) on the group's rank 0.
  const auto sweep_all = [&](CollectiveTransport& over, int group, int group_rank, const std::string& line) {
    try {
      for (size_t c = 0; c < std::size(kCollectives); ++c) {
        if (!line.empty()) say(collective_label(transport, kCollectives[c]) + " " + line);
        const std::vector<CollectivePoint> points = over.sweep(kCollectives[c]);
        if (group_rank == 0) keep(c, group, over.ranks(), points);
      }
    } catch (const TransportUnavailable& failure) {
      if (unavailable.empty()) unavailable = failure.what();
    }
  };
  if (const std::unique_ptr<CollectiveTransport> every_node = opened(comm)) {
    sweep_all(*every_node, -1, rank,
              "over all " + std::to_string(size) + " nodes" +
                  (transport == "mpi" ? "" : " (" + std::to_string(every_node->ranks()) + " GPUs)") + ", " + sizes_text);
  } else {
    say(transport + " over all " + std::to_string(size) + " nodes: could not be set up; on to the groups");
  }
  const std::vector<std::vector<int>> groups = node_groups(size);
  if (!groups.empty()) {
    int my_group = MPI_UNDEFINED;
    for (size_t g = 0; g < groups.size(); ++g)
      if (std::find(groups[g].begin(), groups[g].end(), rank) != groups[g].end()) my_group = static_cast<int>(g);
    MPI_Comm group = MPI_COMM_NULL;
    MPI_Comm_split(comm, my_group, rank, &group);
    const auto measure_group = [&] {
      int group_rank = 0;
      MPI_Comm_rank(group, &group_rank);
      if (const std::unique_ptr<CollectiveTransport> members = opened(group)) sweep_all(*members, my_group, group_rank, "");
    };
    const std::string every = transport == "mpi" ? "every collective" : "every " + transport + " collective";
    std::string nodes_text = std::to_string(groups.size()) + " groups of " + std::to_string(groups.front().size()) + " nodes";
    if (groups.back().size() != groups.front().size()) nodes_text += " (the last of " + std::to_string(groups.back().size()) + ")";
    if (level.one_at_a_time) {
      for (size_t g = 0; g < groups.size(); ++g) {
        say(every + " over group " + std::to_string(g + 1) + " of " + nodes_text + " (one at a time)");
        if (my_group == static_cast<int>(g)) measure_group();
        clocksync::idle_barrier(comm);
      }
    } else {
      say(every + " over " + nodes_text + " at once");
      if (group != MPI_COMM_NULL) measure_group();
      clocksync::idle_barrier(comm);
    }
    if (group != MPI_COMM_NULL) MPI_Comm_free(&group);
  }
  const std::vector<double> all = allgather_rows(comm, rows);
  std::vector<CollectiveSweep> sweeps;
  if (rank != 0) return sweeps;
  // Rows come in rank order, each rank's in the order it kept them: full
  // scale first, then the groups in order, each collective's sizes together.
  const size_t record = 4 + static_cast<size_t>(level.collective_iterations);
  int last_collective = -1, last_group = -2;
  for (size_t k = 0; k + record <= all.size(); k += record) {
    const double* at = all.data() + k;
    const int collective = static_cast<int>(at[0]), group = static_cast<int>(at[1]);
    if (collective != last_collective || group != last_group) {
      CollectiveSweep sweep{std::string(kCollectives[static_cast<size_t>(collective)]), {}, {}, transport,
                            static_cast<int>(at[2])};
      if (group < 0) {
        for (int n = 0; n < size; ++n) sweep.nodes.push_back(n);
      } else {
        sweep.nodes = groups[static_cast<size_t>(group)];
      }
      sweeps.push_back(sweep);
      last_collective = collective, last_group = group;
    }
    sweeps.back().points.push_back({static_cast<size_t>(at[3]), std::vector<double>(at + 4, at + record)});
  }
  return sweeps;
}

void RunRecord::begin_stage(const std::string& line) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stage_ = line;
    changed_ = std::chrono::steady_clock::now();
    peer_ = -1;
    pairs_.clear();
  }
  progress_(line);
}

void RunRecord::measured(const Measurements& so_far) {
  std::lock_guard<std::mutex> lock(mutex_);
  changed_ = std::chrono::steady_clock::now();
  so_far_ = so_far;
}

void RunRecord::call_roll(int nodes) {
  std::lock_guard<std::mutex> lock(mutex_);
  changed_ = std::chrono::steady_clock::now();
  answered_.assign(static_cast<size_t>(nodes), false);
  answered_[0] = true;
}

void RunRecord::answered(int node) {
  std::lock_guard<std::mutex> lock(mutex_);
  changed_ = std::chrono::steady_clock::now();
  answered_[static_cast<size_t>(node)] = true;
  if (std::find(answered_.begin(), answered_.end(), false) == answered_.end()) answered_.clear();
}

void RunRecord::waiting_on(int peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  changed_ = std::chrono::steady_clock::now();
  peer_ = peer;
}

void RunRecord::measuring_pairs(const std::vector<std::pair<int, int>>& pairs) {
  std::lock_guard<std::mutex> lock(mutex_);
  pairs_ = pairs;
}

void RunRecord::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  finished_ = true;
}

std::optional<Measurements> RunRecord::cut_short(const std::string& why) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return std::nullopt;
  Measurements out = so_far_;
  CutShort cut{stage_, why, {}, {}};
  for (size_t n = 0; n < answered_.size(); ++n)
    if (!answered_[n]) cut.silent_nodes.push_back(static_cast<int>(n));
  if (peer_ >= 0) cut.silent_nodes.push_back(peer_);
  const auto silent = [&](int n) { return std::find(cut.silent_nodes.begin(), cut.silent_nodes.end(), n) != cut.silent_nodes.end(); };
  for (const auto& [a, b] : pairs_)
    if (silent(a) && silent(b)) cut.silent_pairs.emplace_back(a, b);
  out.cut_short = cut;
  return out;
}

std::optional<Measurements> RunRecord::cut_short_when_still(const std::string& why, std::chrono::milliseconds still,
                                                            std::chrono::milliseconds at_most) const {
  const auto give_up = std::chrono::steady_clock::now() + at_most;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto now = std::chrono::steady_clock::now();
      if (now >= give_up || (!answered_.empty() && now - changed_ >= still)) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cut_short(why);
}

std::vector<size_t> collective_sizes(std::string_view collective, int ranks, const Level& level) {
  if (level.collective_step < 2) throw Error("collective sizes grow by a step of 2 or more, not " + std::to_string(level.collective_step));
  // Allreduce's S is its buffer of floats; the others' is as many floats from each rank.
  const size_t granule = sizeof(float) * (collective == "allreduce" ? 1 : static_cast<size_t>(std::max(ranks, 1)));
  std::vector<size_t> sizes;
  for (size_t wanted = 8;; wanted *= static_cast<size_t>(level.collective_step)) {
    const size_t bytes = std::max(granule, std::min(wanted, level.collective_max_bytes) / granule * granule);
    if (sizes.empty() || bytes > sizes.back()) sizes.push_back(bytes);
    if (wanted >= level.collective_max_bytes) break;
  }
  return sizes;
}

std::vector<CollectiveSweep> measure_collectives(MPI_Comm comm, const Level& level,
                                                 const std::function<void(const std::string&)>& progress) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  // One node alone has no network for a collective to cross.
  if (size < 2) return {};
  std::string never;  // MPI's collectives are over the job's own communicator
  return sweep_every_scale(
      comm, level, "mpi", [&](MPI_Comm group) { return open_mpi_collectives(group, level); }, progress, never);
}

Level level_named(std::string_view name) {
  if (name == "quick") return {.gemm_n = 1024, .triad_bytes = 96u << 20, .gpu_gemm_n = 4096, .gpu_triad_bytes = 1u << 30,
                               .gpu_sustain_seconds = 5,
                               .link_bytes = 4u << 20,
                               .latency_exchanges = 100, .repeats = 9, .retest_repeats = 3, .collective_max_bytes = 1u << 20,
                               .nccl_max_bytes = 64u << 20, .collective_step = 8, .collective_warmup = 2, .collective_iterations = 20};
  if (name == "full") return {.gemm_n = 2048, .triad_bytes = 768u << 20, .gpu_gemm_n = 8192,
                              .gpu_triad_bytes = size_t{6} << 30, .gpu_sustain_seconds = 30, .link_bytes = 64u << 20,
                              .latency_exchanges = 1000, .repeats = 15, .retest_repeats = 5, .collective_max_bytes = 64u << 20,
                              .nccl_max_bytes = size_t{1} << 30, .collective_step = 4, .collective_warmup = 5, .collective_iterations = 100};
  throw Error("level '" + std::string(name) + "' is neither quick nor full");
}

Inventory take_inventory() {
  Inventory inventory;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  inventory.host = host;
  inventory.cpu_model = first_value("/proc/cpuinfo", "model name");
  inventory.cpus = std::max(static_cast<int>(usable_cpus_by_core().cpus.size()), 1);
  const std::string memory = first_value("/proc/meminfo", "MemTotal");
  inventory.memory_bytes = std::atoll(memory.c_str()) * 1024;
  utsname names{};
  if (::uname(&names) == 0) inventory.kernel = names.release;
  char library[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(library, &length);
  inventory.mpi_library = std::string(library, static_cast<size_t>(length));
  inventory.mpi_library = inventory.mpi_library.substr(0, inventory.mpi_library.find_first_of("\n,"));
  inventory.rankscope_version = kRankscopeVersion;
  return inventory;
}

// OpenBLAS, loaded when first needed rather than linked: loading it starts a
// thread pool as wide as the machine, which no other command of rankscope
// (the sidecars and launchers in every rank among them) should carry.
struct Blas {
  decltype(&cblas_dgemm) dgemm = nullptr;
  decltype(&openblas_set_num_threads) set_threads = nullptr;
};

const Blas& blas() {
  static const Blas loaded = [] {
    // Every call runs on one BLAS thread, on a worker of ours: a pool that OpenBLAS started on loading
    // would only spin, its threads taking cores from the first repeats for a tenth of a second.
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    void* library = ::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      throw Error(std::string("the compute check needs OpenBLAS (Debian package libopenblas0): ") + ::dlerror());
    }
    Blas found;
    found.dgemm = reinterpret_cast<decltype(&cblas_dgemm)>(::dlsym(library, "cblas_dgemm"));
    found.set_threads = reinterpret_cast<decltype(&openblas_set_num_threads)>(::dlsym(library, "openblas_set_num_threads"));
    if (!found.dgemm || !found.set_threads) throw Error("libopenblas.so.0 lacks cblas_dgemm or openblas_set_num_threads");
    return found;
  }();
  return loaded;
}

CpusByCore cpus_by_core(const std::vector<int>& allowed, const std::string& cpu_folder) {
  // Each CPU's place among its core's allowed CPUs: 0 for the first.
  std::map<std::string, int> taken;
  std::vector<std::pair<int, int>> placed;  // (place, cpu)
  for (int cpu : allowed) {
    std::ifstream file(cpu_folder + "/cpu" + std::to_string(cpu) + "/topology/core_cpus_list");
    std::string core;
    if (!std::getline(file, core) || core.empty()) core = "cpu" + std::to_string(cpu);
    placed.emplace_back(taken[core]++, cpu);
  }
  std::stable_sort(placed.begin(), placed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  CpusByCore out;
  for (const auto& [place, cpu] : placed) out.cpus.push_back(cpu);
  out.cores = static_cast<int>(taken.size());
  return out;
}

CpusByCore usable_cpus_by_core() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  return cpus_by_core(cpus);
}

PinnedWorkers::PinnedWorkers(int threads)
    : start_(static_cast<ptrdiff_t>(threads) + 1), done_(static_cast<ptrdiff_t>(threads) + 1) {
  const std::vector<int> cpus = usable_cpus_by_core().cpus;
  for (size_t t = 0; t < static_cast<size_t>(threads); ++t) {
    const int cpu = cpus.empty() ? -1 : cpus[t % cpus.size()];
    threads_.emplace_back([this, t, cpu] {
      if (cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      }
      for (;;) {
        start_.arrive_and_wait();
        if (!work_) return;
        (*work_)(t);
        done_.arrive_and_wait();
      }
    });
  }
}

PinnedWorkers::~PinnedWorkers() {
  work_ = nullptr;
  start_.arrive_and_wait();
  for (std::thread& thread : threads_) thread.join();
}

void PinnedWorkers::run(const std::function<void(size_t)>& work) {
  work_ = &work;
  start_.arrive_and_wait();
  done_.arrive_and_wait();
}

GemmWorkers::GemmWorkers(int n, int threads) : n_(n), operands_(static_cast<size_t>(threads)), workers_(threads) {
  blas().set_threads(1);
  const size_t elements = static_cast<size_t>(n) * static_cast<size_t>(n);
  workers_.run([&](size_t t) {
    Operands& o = operands_[t];
    o.a.resize(elements), o.b.resize(elements), o.c.assign(elements, 0);
    for (size_t i = 0; i < elements; ++i) o.a[i] = static_cast<double>(i % 7) * 0.25, o.b[i] = static_cast<double>(i % 5) * 0.5;
  });
}

void GemmWorkers::run() {
  const Blas& library = blas();
  workers_.run([&](size_t t) {
    Operands& o = operands_[t];
    library.dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_, n_, n_, 1.0, o.a.data(), n_, o.b.data(), n_, 0.0,
                  o.c.data(), n_);
  });
}

double GemmWorkers::flops() const {
  return 2.0 * static_cast<double>(operands_.size()) * n_ * static_cast<double>(n_) * n_;
}

double gemm_gflops(int n, int threads) {
  GemmWorkers workers(n, threads);
  workers.run();  // pages touched
  const auto start = std::chrono::steady_clock::now();
  workers.run();
  return workers.flops() / seconds_since(start) / 1e9;
}

size_t last_level_cache_bytes(const std::string& cpu_folder) {
  namespace fs = std::filesystem;
  const auto read = [](const fs::path& path) {
    std::ifstream file(path);
    std::string text;
    std::getline(file, text);
    return text;
  };
  // The highest level's data caches, by the CPUs that share each.
  int highest = 0;
  std::map<std::string, size_t> at_highest;
  std::error_code error;
  for (const fs::directory_entry& cpu : fs::directory_iterator(cpu_folder, error)) {
    const std::string name = cpu.path().filename();
    if (!name.starts_with("cpu") || name.size() == 3 || !std::isdigit(static_cast<unsigned char>(name[3]))) continue;
    for (const fs::directory_entry& index : fs::directory_iterator(cpu.path() / "cache", error)) {
      if (read(index.path() / "type") == "Instruction") continue;
      const int level = std::atoi(read(index.path() / "level").c_str());
      const std::string size = read(index.path() / "size");
      char* unit = nullptr;
      size_t bytes = std::strtoull(size.c_str(), &unit, 10);
      if (*unit == 'K') bytes <<= 10;
      if (*unit == 'M') bytes <<= 20;
      if (*unit == 'G') bytes <<= 30;
      if (level < highest || bytes == 0) continue;
      if (level > highest) highest = level, at_highest.clear();
      at_highest[read(index.path() / "shared_cpu_list")] = bytes;
    }
  }
  size_t total = 0;
  for (const auto& [cpus, bytes] : at_highest) total += bytes;
  return total;
}

size_t triad_bytes_for(size_t level_bytes, size_t largest_cache_bytes, size_t least_available_bytes) {
  const size_t stream_rule = 3 * 4 * largest_cache_bytes;
  return std::max(level_bytes, std::min(stream_rule, least_available_bytes / 4));
}

double triad_gbps(size_t bytes, int threads) {
  const size_t count = bytes / 3 / sizeof(double);
  // Left untouched here: each worker touches its share first.
  const std::unique_ptr<double[]> a(new double[count]), b(new double[count]), c(new double[count]);
  PinnedWorkers workers(threads);
  const size_t share = count / static_cast<size_t>(threads);
  const auto shares = [&](const std::function<void(size_t, size_t)>& loop) {
    workers.run([&](size_t t) { loop(share * t, t + 1 == static_cast<size_t>(threads) ? count : share * (t + 1)); });
  };
  shares([&](size_t begin, size_t end) {
    std::fill(&a[begin], &a[end], 0.0), std::fill(&b[begin], &b[end], 1.0), std::fill(&c[begin], &c[end], 2.0);
  });
  const auto triad = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) a[i] = b[i] + 3.0 * c[i];
  };
  // As STREAM reports: the best of several passes after a first. One pass over arrays that fit the
  // fastest nodes' memory in milliseconds is timed to within the wake-up of its workers.
  constexpr int kTimedPasses = 5;
  shares(triad);
  double best = 0;
  for (int pass = 0; pass < kTimedPasses; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    shares(triad);
    best = std::max(best, 3.0 * sizeof(double) * static_cast<double>(count) / seconds_since(start) / 1e9);
  }
  return best;
}

namespace {

// Every GPU of every node: `level.repeats` repeats of its GEMM and its
// triad, the nodes as `on_every_node` runs them, gathered to rank 0 once
// done. A GPU is the node's own: no other node's work can disturb it, so
// its repeats need not go round the fleet. A node whose GPUs fail to run
// says why.
std::string measure_gpus(MPI_Comm comm, const Level& level, const NodeGpus& mine,
                         const std::function<void(const std::function<void()>&)>& on_every_node, RunTimeline& timeline,
                         Measurements& out) {
  std::vector<GpuMeasurements> measured;
  for (const GpuDevice& device : mine.devices)
    measured.push_back({device.index, device.model, device.uuid, device.memory_bytes, {}, {}, {}, {}});
  // A GPU that fails is measured no more; the node's other GPUs go on.
  std::string error = mine.unusable > 0 ? mine.unavailable : "";
  std::vector<bool> failed(measured.size(), false);
  on_every_node([&] {
    for (int r = 0; r < level.repeats; ++r) {
      for (size_t g = 0; g < measured.size(); ++g) {
        if (failed[g]) continue;
        GpuMeasurements& gpu = measured[g];
        const std::string name = "accept: gpu" + std::to_string(gpu.index);
        try {
          {
            const RunTimeline::Range range(timeline, name + " compute repeat " + std::to_string(r + 1));
            gpu.gemm_tflops.push_back(gpu_gemm_tflops(gpu.index, level.gpu_gemm_n));
          }
          const RunTimeline::Range range(timeline, name + " memory repeat " + std::to_string(r + 1));
          gpu.triad_gbps.push_back(gpu_triad_gbps(gpu.index, level.gpu_triad_bytes));
        } catch (const std::exception& failure) {
          failed[g] = true;
          error += (error.empty() ? "" : "; ") + ("gpu" + std::to_string(gpu.index) + ": ") + failure.what();
        }
      }
    }
    if (level.gpu_sustain_seconds <= 0) return;
    // Every GPU of the node at once, as training loads them: what a node's
    // power and cooling hold shows only then.
    const int64_t began = timeline.now();
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                               std::chrono::duration<double>(level.gpu_sustain_seconds));
    std::vector<std::string> sustain_errors(measured.size());
    {
      std::vector<std::jthread> loads;  // joined however this block ends
      for (size_t g = 0; g < measured.size(); ++g) {
        if (failed[g]) continue;
        loads.emplace_back([&, g] {
          try {
            HeldGemm held = gpu_gemm_held(measured[g].index, measured[g].uuid, level.gpu_gemm_n, until);
            measured[g].sustained_tflops = std::move(held.tflops);
            measured[g].clocks_held_back = std::move(held.clocks_held_back);
          } catch (const std::exception& failure) {
            sustain_errors[g] = failure.what();
          }
        });
      }
    }
    timeline.range("accept: gpus held", began, timeline.now());
    for (size_t g = 0; g < measured.size(); ++g) {
      if (sustain_errors[g].empty()) continue;
      error += (error.empty() ? "" : "; ") + ("gpu" + std::to_string(measured[g].index) + " held: ") + sustain_errors[g];
    }
  });
  // A row per node: its GPUs, then per GPU its index, memory, and each
  // figure's count and repeats; strings: the error, then each GPU's model,
  // UUID and clocks held back.
  std::vector<double> row{static_cast<double>(measured.size())};
  std::vector<std::string> texts{error};
  for (const GpuMeasurements& gpu : measured) {
    row.insert(row.end(), {static_cast<double>(gpu.index), static_cast<double>(gpu.memory_bytes)});
    for (const std::vector<double>* figures : {&gpu.gemm_tflops, &gpu.triad_gbps, &gpu.sustained_tflops}) {
      row.push_back(static_cast<double>(figures->size()));
      row.insert(row.end(), figures->begin(), figures->end());
    }
    texts.insert(texts.end(), {gpu.model, gpu.uuid, gpu.clocks_held_back});
  }
  const std::vector<double> rows = allgather_rows(comm, row);
  const std::vector<std::string> all_texts = allgather_strings(comm, texts);
  auto at = rows.begin();
  auto text = all_texts.begin();
  for (NodeMeasurements& node : out.nodes) {  // rank 0's alone
    const auto gpus = static_cast<size_t>(*at++);
    node.gpu_error = *text++;
    node.gpus.clear();
    for (size_t g = 0; g < gpus; ++g) {
      GpuMeasurements gpu;
      gpu.index = static_cast<int>(*at++);
      gpu.memory_bytes = static_cast<int64_t>(*at++);
      for (std::vector<double>* figures : {&gpu.gemm_tflops, &gpu.triad_gbps, &gpu.sustained_tflops}) {
        const auto count = static_cast<ptrdiff_t>(*at++);
        figures->assign(at, at + count);
        at += count;
      }
      gpu.model = *text++;
      gpu.uuid = *text++;
      gpu.clocks_held_back = *text++;
      node.gpus.push_back(std::move(gpu));
    }
  }
  return error;
}

// NCCL's collectives between every node's GPUs (accept-reference.md, "NCCL
// collectives"), where every node can take part with the same NCCL; else
// why not, in out.nccl_not_measured. A node that could not set up its part
// of a communicator gets its reason in its nccl_error, and the sets of nodes
// without it are still measured. Collective over `comm`; complete on rank 0.
void measure_nccl_collectives(MPI_Comm comm, const Level& level, const NodeGpus& mine, const std::string& gpu_error,
                              const std::vector<std::string>& hosts,
                              const std::function<void(const std::string&)>& progress, RunTimeline& timeline,
                              Measurements& out) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const std::string cannot = mine.devices.empty()          ? "no GPU CUDA can use"
                             : !gpu_error.empty()          ? "its GPUs could not all be measured (gpu.measure)"
                             : mine.nccl_version.empty()   ? "no libnccl.so.2"
                                                           : nccl_problem();
  const std::vector<std::string> each = allgather_strings(comm, {cannot, mine.nccl_version});
  std::string not_measured;
  for (size_t n = 0; n < hosts.size(); ++n) {
    if (!each[2 * n].empty()) not_measured += (not_measured.empty() ? "" : "; ") + hosts[n] + ": " + each[2 * n];
  }
  for (size_t n = 1; n < hosts.size() && not_measured.empty(); ++n) {
    if (each[2 * n + 1] != each[1]) not_measured = "NCCL differs across nodes (inventory.nccl_version)";
  }
  if (!not_measured.empty()) {
    if (rank == 0) {
      progress("collectives: nccl: not measured: " + not_measured);
      out.nccl_not_measured = not_measured;
    }
    return;
  }
  Level nccl_level = level;
  nccl_level.collective_max_bytes = level.nccl_max_bytes;
  const int64_t began = timeline.now();
  std::string unavailable;
  const std::vector<CollectiveSweep> sweeps = sweep_every_scale(
      comm, nccl_level, "nccl", [&](MPI_Comm group) { return open_nccl_collectives(group, mine, nccl_level); },
      progress, unavailable);
  timeline.range("accept: nccl collectives", began, timeline.now());
  const std::vector<std::string> errors = allgather_strings(comm, {unavailable});
  if (rank != 0) return;
  out.collectives.insert(out.collectives.end(), sweeps.begin(), sweeps.end());
  for (size_t n = 0; n < out.nodes.size(); ++n) out.nodes[n].nccl_error = errors[n];
}

// A figure each node measures of itself (compute, memory): its line on the
// terminal, this node's repeats so far (retests included), where rank 0
// files every node's, and one measurement.
struct NodeFigure {
  std::string stage;
  std::vector<double> mine;
  std::vector<double> NodeMeasurements::*figure = nullptr;
  std::function<double()> once;
};

using Rounds = std::vector<std::vector<std::pair<int, int>>>;

// What measure()'s stages share: the run's arguments, this rank's place in
// it, and what has been measured so far (complete on rank 0).
struct MeasureRun {
  MeasureRun(MPI_Comm comm, const Level& level, RunTimeline& timeline, RunRecord& record, const Rules& rules,
             const std::function<Acceptance(const Measurements&)>& judge_so_far);

  // A stage's line, on rank 0.
  void say(const std::string& line) const;
  // The nodes `measuring` (every rank knows which) run `body`, node by node (one at a time) or all
  // together; every other rank waits idle.
  void on_nodes(const std::vector<int>& measuring, const std::function<void()>& body);
  // Every node's repeats of a figure so far, to rank 0 after each repeat, as rows of [count, repeats...]
  // in node order (a node retested has more).
  void gather_repeats(const NodeFigure& figure);
  // `repeats` repeats of a node figure by the nodes `measuring`; `stage` names them on the terminal,
  // `name` in the timeline.
  void repeat_on_nodes(NodeFigure& figure, const std::string& stage, const std::string& name,
                       const std::vector<int>& measuring, int repeats);
  // Every link's repeats so far, to rank 0 after each repeat, as rows of [a, b, count, bandwidths...,
  // latencies...] (a link retested has more).
  void gather_links();
  // Every pair of the rounds (a < b in each) that `rounds_of_repeat` gives each repeat, round by
  // round, repeat by repeat.
  void measure_links(const std::function<Rounds(int)>& rounds_of_repeat, int repeats, const std::string& what,
                     const std::string& name);

  MPI_Comm comm;
  const Level& level;
  RunTimeline& timeline;
  RunRecord& record;
  const Rules& rules;
  const std::function<Acceptance(const Measurements&)>& judge_so_far;
  const std::function<void(const std::string&)> progress;  // the collectives' lines, on rank 0
  int rank = 0, size = 1;
  std::vector<int> every_node;
  Measurements out;
  std::vector<std::string> hosts;  // every node's, in node order
  NodeGpus my_gpus;
  bool any_gpu = false;      // some node has a GPU
  std::string my_gpu_error;  // why this node's GPUs could not all be measured; empty when they were
  NodeFigure compute, memory;
  std::vector<char> buffer;  // what each end of a link sends
  // The links this rank is the lower end of: peer → (bandwidths, latencies).
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> measured_links;
};

MeasureRun::MeasureRun(MPI_Comm comm, const Level& level, RunTimeline& timeline, RunRecord& record,
                       const Rules& rules, const std::function<Acceptance(const Measurements&)>& judge_so_far)
    : comm(comm),
      level(level),
      timeline(timeline),
      record(record),
      rules(rules),
      judge_so_far(judge_so_far),
      progress([&record](const std::string& line) { record.begin_stage(line); }) {
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  every_node.resize(static_cast<size_t>(size));
  std::iota(every_node.begin(), every_node.end(), 0);
}

void MeasureRun::say(const std::string& line) const {
  if (rank == 0) record.begin_stage(line);
}

void MeasureRun::on_nodes(const std::vector<int>& measuring, const std::function<void()>& body) {
  const auto measures = [&](int node) { return std::find(measuring.begin(), measuring.end(), node) != measuring.end(); };
  if (!level.one_at_a_time) {
    roll_call(comm, record, measures(rank) ? body : std::function<void()>());
    return;
  }
  for (int node : measuring) roll_call(comm, record, node == rank ? body : std::function<void()>());
}

void MeasureRun::gather_repeats(const NodeFigure& figure) {
  std::vector<double> row{static_cast<double>(figure.mine.size())};
  row.insert(row.end(), figure.mine.begin(), figure.mine.end());
  const std::vector<double> all = allgather_rows(comm, row);
  if (rank != 0) return;
  auto at = all.begin();
  for (NodeMeasurements& node : out.nodes) {
    const auto count = static_cast<ptrdiff_t>(*at);
    (node.*figure.figure).assign(at + 1, at + 1 + count);
    at += 1 + count;
  }
  record.measured(out);
}

void MeasureRun::repeat_on_nodes(NodeFigure& figure, const std::string& stage, const std::string& name,
                                 const std::vector<int>& measuring, int repeats) {
  const int64_t began = timeline.now();
  for (int r = 0; r < repeats; ++r) {
    say(stage + ", repeat " + std::to_string(r + 1) + " of " + std::to_string(repeats));
    on_nodes(measuring, [&] {
      const RunTimeline::Range repeat(timeline, name + " repeat " + std::to_string(figure.mine.size() + 1));
      figure.mine.push_back(figure.once());
    });
    gather_repeats(figure);
  }
  timeline.range(name, began, timeline.now());
}

void MeasureRun::gather_links() {
  std::vector<double> mine;
  for (const auto& [peer, figures] : measured_links) {
    mine.insert(mine.end(), {static_cast<double>(rank), static_cast<double>(peer), static_cast<double>(figures.first.size())});
    mine.insert(mine.end(), figures.first.begin(), figures.first.end());
    mine.insert(mine.end(), figures.second.begin(), figures.second.end());
  }
  const std::vector<double> all = allgather_rows(comm, mine);
  if (rank != 0) return;
  out.links.clear();
  for (auto at = all.begin(); at != all.end();) {
    const auto count = static_cast<ptrdiff_t>(at[2]);
    LinkMeasurements link;
    link.a = static_cast<int>(at[0]);
    link.b = static_cast<int>(at[1]);
    link.bandwidth_gbps.assign(at + 3, at + 3 + count);
    link.latency_us.assign(at + 3 + count, at + 3 + 2 * count);
    out.links.push_back(link);
    at += 3 + 2 * count;
  }
  std::sort(out.links.begin(), out.links.end(),
            [](const LinkMeasurements& x, const LinkMeasurements& y) { return std::tie(x.a, x.b) < std::tie(y.a, y.b); });
  record.measured(out);
}

void MeasureRun::measure_links(const std::function<Rounds(int)>& rounds_of_repeat, int repeats,
                               const std::string& what, const std::string& name) {
  for (int r = 0; r < repeats; ++r) {
    const Rounds rounds = rounds_of_repeat(r);
    const RunTimeline::Range repeat(timeline, name + " repeat " + std::to_string(r + 1));
    say("links: " + what + "repeat " + std::to_string(r + 1) + " of " + std::to_string(repeats) + " (" +
        std::to_string(rounds.size()) + (rounds.size() == 1 ? " round" : " rounds") +
        (level.one_at_a_time ? ", one link at a time)" : ")"));
    for (const auto& round : rounds) {
      const size_t at_once = level.one_at_a_time ? 1 : std::max<size_t>(round.size(), 1);
      for (size_t first = 0; first < round.size(); first += at_once) {
        const std::vector<std::pair<int, int>> pairs(round.begin() + static_cast<ptrdiff_t>(first),
                                                     round.begin() + static_cast<ptrdiff_t>(std::min(first + at_once, round.size())));
        if (rank == 0) record.measuring_pairs(pairs);
        for (const auto& [a, b] : pairs) {
          if (rank != a && rank != b) continue;
          const int peer = rank == a ? b : a;
          if (rank == 0) record.waiting_on(peer);
          const auto [bandwidth, latency] = measure_link(comm, peer, rank == a, level, buffer, timeline);
          if (rank == 0) record.waiting_on(-1);
          if (rank == a) {
            measured_links[b].first.push_back(bandwidth);
            measured_links[b].second.push_back(latency);
          }
        }
        roll_call(comm, record, {});
      }
    }
    gather_links();
  }
}

// One round of ring tests, no node in two rings: the rings at once (or one at a time), each its
// repeats; every node's best to rank 0, which files them as tests of `round`.
void measure_ring_round(MeasureRun& run, const std::vector<std::vector<int>>& rings, int round, bool pairs,
                        std::vector<char>& received) {
  const Level& level = run.level;
  const int rank = run.rank;
  const RunTimeline::Range stage(run.timeline, "accept: group tests round " + std::to_string(round + 1));
  int mine = MPI_UNDEFINED;
  for (size_t t = 0; t < rings.size(); ++t)
    if (std::find(rings[t].begin(), rings[t].end(), rank) != rings[t].end()) mine = static_cast<int>(t);
  const std::vector<int> ring_nodes = mine == MPI_UNDEFINED ? std::vector<int>() : rings[static_cast<size_t>(mine)];
  // Ranked in ring order, so that the next node in the ring is the next rank.
  const auto position = std::find(ring_nodes.begin(), ring_nodes.end(), rank) - ring_nodes.begin();
  MPI_Comm ring = MPI_COMM_NULL;
  MPI_Comm_split(run.comm, mine, static_cast<int>(position), &ring);
  double best = 0;
  std::string sizes;
  for (const std::vector<int>& r : rings) sizes += (sizes.empty() ? "" : ", ") + std::to_string(r.size());
  run.say("links: group tests, round " + std::to_string(round + 1) + (pairs ? " (pairs)" : "") +
          ": " + std::to_string(rings.size()) + (rings.size() == 1 ? " ring of " : " rings of ") + sizes + " nodes, " +
          std::to_string(level.repeats) + " repeats" + (level.one_at_a_time ? ", one ring at a time" : ", at once"));
  for (size_t t = 0; t < (level.one_at_a_time ? rings.size() : 1); ++t) {
    if (rank == 0) {
      std::vector<std::pair<int, int>> edges;
      for (size_t r = 0; r < rings.size(); ++r) {
        if (level.one_at_a_time && r != t) continue;
        for (size_t i = 0; i < rings[r].size(); ++i) edges.emplace_back(rings[r][i], rings[r][(i + 1) % rings[r].size()]);
      }
      run.record.measuring_pairs(edges);
    }
    if (mine != MPI_UNDEFINED && (!level.one_at_a_time || t == static_cast<size_t>(mine))) {
      // Rank 0, in a ring, waits on its neighbour there: it is first in every ring it is in (rings and
      // their halves keep node order, pairs are (lower, higher)).
      if (rank == 0) run.record.waiting_on(ring_nodes[1 % ring_nodes.size()]);
      for (int r = 0; r < level.repeats; ++r)
        best = std::max(best, measure_ring(ring, ring_nodes, run.buffer, received, run.timeline));
      if (rank == 0) run.record.waiting_on(-1);
    }
    roll_call(run.comm, run.record, {});
  }
  if (ring != MPI_COMM_NULL) MPI_Comm_free(&ring);
  const std::vector<double> figures = allgather_rows(run.comm, std::vector<double>{mine == MPI_UNDEFINED ? -1.0 : best});
  if (rank != 0) return;
  for (const std::vector<int>& r : rings) {
    RingTest test{round, r, {}, pairs};
    for (int n : r) test.gbps.push_back(figures[static_cast<size_t>(n)]);
    run.out.ring_tests.push_back(test);
  }
  run.record.measured(run.out);
}

// Group testing's next step, planned by rank 0 from the ring tests so far;
// everyone learns the plan as rows of [size, nodes...] for each ring, then a
// -1 and the pairs' ends.
GroupTestingStep next_group_tests_everywhere(const MeasureRun& run) {
  std::vector<int> plan;
  if (run.rank == 0) {
    const GroupTestingStep step = next_group_tests(run.size, run.out.ring_tests, run.rules);
    for (const std::vector<int>& ring : step.rings) {
      plan.push_back(static_cast<int>(ring.size()));
      plan.insert(plan.end(), ring.begin(), ring.end());
    }
    plan.push_back(-1);
    for (const auto& [a, b] : step.links) plan.insert(plan.end(), {a, b});
  }
  plan = allgather_rows(run.comm, plan);
  GroupTestingStep step;
  size_t k = 0;
  for (; plan[k] >= 0; k += static_cast<size_t>(plan[k]) + 1)
    step.rings.emplace_back(plan.begin() + static_cast<ptrdiff_t>(k) + 1, plan.begin() + static_cast<ptrdiff_t>(k) + 1 + plan[k]);
  for (++k; k + 1 < plan.size(); k += 2) step.links.emplace_back(plan[k], plan[k + 1]);
  return step;
}

void screen_every_pair(MeasureRun& run) {
  run.measure_links([&](int r) { return pairing_rounds(run.size, static_cast<unsigned>(r)); }, run.level.repeats,
                    "every pair, ", "accept: links");
}

// Rings bisected round by round; then, bisection over, each pair as a ring
// of two, judged as every ring is, and as a link, for its bandwidth each way
// and its latency.
void screen_by_group_testing(MeasureRun& run) {
  run.out.link_screen = LinkScreen::group_testing;
  std::vector<char> received(run.level.link_bytes);
  for (int round = 0;; ++round) {
    const GroupTestingStep step = next_group_tests_everywhere(run);
    if (!step.rings.empty()) {
      measure_ring_round(run, step.rings, round, false, received);
      continue;
    }
    const Rounds pair_rounds = rounds_of(step.links);
    for (const auto& pair_round : pair_rounds) {
      std::vector<std::vector<int>> pair_rings;
      for (const auto& [a, b] : pair_round) pair_rings.push_back({a, b});
      measure_ring_round(run, pair_rings, round, true, received);
    }
    if (!step.links.empty())
      run.measure_links([&](int) { return pair_rounds; }, run.level.repeats,
                        std::to_string(step.links.size()) + " pairs of group testing, ", "accept: links");
    break;
  }
}

// What the first pass left unpassed (retests_of, judged by rank 0), for
// every rank: [compute nodes..., -1, memory nodes..., -1, a, b, a, b...].
Retests retests_everywhere(const MeasureRun& run) {
  std::vector<int> plan;
  if (run.rank == 0) {
    const Retests unpassed = retests_of(run.judge_so_far(run.out), run.out);
    plan = unpassed.compute;
    plan.push_back(-1);
    plan.insert(plan.end(), unpassed.memory.begin(), unpassed.memory.end());
    plan.push_back(-1);
    for (const auto& [a, b] : unpassed.links) plan.insert(plan.end(), {a, b});
  }
  plan = allgather_rows(run.comm, plan);
  const auto compute_end = std::find(plan.begin(), plan.end(), -1), memory_end = std::find(compute_end + 1, plan.end(), -1);
  Retests retests;
  retests.compute.assign(plan.begin(), compute_end);
  retests.memory.assign(compute_end + 1, memory_end);
  for (auto at = memory_end + 1; at + 1 < plan.end(); at += 2) retests.links.emplace_back(at[0], at[1]);
  return retests;
}

// ---------------------------------------------------------- the stages ---

// Every node's inventory, to rank 0; every rank learns the hosts and
// whether any node has a GPU.
void take_every_inventory(MeasureRun& run) {
  run.say("inventory");
  const Inventory mine = take_inventory();
  run.my_gpus = find_gpus();
  std::string gpu_models;
  for (const GpuDevice& device : run.my_gpus.devices)
    if (gpu_models.find(device.model) == std::string::npos) gpu_models += (gpu_models.empty() ? "" : " + ") + device.model;
  const std::vector<std::string> fields = {mine.host, mine.cpu_model, std::to_string(mine.cpus),
                                           std::to_string(mine.memory_bytes), mine.kernel, mine.mpi_library,
                                           mine.rankscope_version, std::to_string(run.my_gpus.count()), gpu_models,
                                           run.my_gpus.driver_version, run.my_gpus.cuda_version,
                                           run.my_gpus.nccl_version, run.my_gpus.unavailable};
  // Every node's fields, node by node.
  const std::vector<std::string> gathered = allgather_strings(run.comm, fields);
  for (size_t n = 0; n < static_cast<size_t>(run.size); ++n) {
    const std::string* field = &gathered[n * fields.size()];
    run.hosts.push_back(field[0]);
    run.any_gpu |= field[7] != "0";
    if (run.rank != 0) continue;
    NodeMeasurements node;
    node.inventory = {field[0], field[1],  std::atoi(field[2].c_str()), std::atoll(field[3].c_str()), field[4],
                      field[5], field[6],  std::atoi(field[7].c_str()),  field[8], field[9], field[10], field[11],
                      field[12]};
    run.out.nodes.push_back(node);
  }
  if (run.rank == 0) run.record.measured(run.out);
}

// The BLAS GEMM and the STREAM triad on every node's CPUs, a worker per core.
void measure_compute_and_memory(MeasureRun& run) {
  const Level& level = run.level;
  const int threads = std::max(usable_cpus_by_core().cores, 1);
  run.compute = {"compute: GEMM " + std::to_string(level.gemm_n) + "^3", {}, &NodeMeasurements::gemm_gflops,
                 [&level, threads] { return gemm_gflops(level.gemm_n, threads); }};
  // One size for the whole fleet, so that every node's figure is of the same work.
  unsigned long long largest_cache = last_level_cache_bytes(), least_available = 0;
  unsigned long long available = std::strtoull(first_value("/proc/meminfo", "MemAvailable").c_str(), nullptr, 10) << 10;
  MPI_Allreduce(MPI_IN_PLACE, &largest_cache, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, run.comm);
  MPI_Allreduce(&available, &least_available, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, run.comm);
  const size_t rule_bytes = triad_bytes_for(level.triad_bytes, largest_cache, least_available);
  const size_t triad_bytes = level.memory_bytes != 0 ? level.memory_bytes : rule_bytes;
  run.memory = {"memory: triad over " + std::to_string(triad_bytes >> 20) + " MiB" +
                    (triad_bytes < rule_bytes ? " (--memory-mb; the STREAM rule asks " + std::to_string(rule_bytes >> 20) +
                                                    " MiB, so caches may serve part of it)"
                                              : ""),
                {}, &NodeMeasurements::triad_gbps, [triad_bytes, threads] { return triad_gbps(triad_bytes, threads); }};
  run.repeat_on_nodes(run.compute, run.compute.stage, "accept: compute", run.every_node, level.repeats);
  run.repeat_on_nodes(run.memory, run.memory.stage, "accept: memory", run.every_node, level.repeats);
}

void measure_every_gpu(MeasureRun& run) {
  if (!run.any_gpu) return;
  const Level& level = run.level;
  run.say("gpus: bf16 GEMM " + std::to_string(level.gpu_gemm_n) + "^3 and triad over " +
          std::to_string(level.gpu_triad_bytes >> 20) + " MiB of device memory on each GPU, " +
          std::to_string(level.repeats) + " repeats" +
          (level.gpu_sustain_seconds > 0 ? printf_string("; then the GEMM held %.0f s on every GPU of a node at once",
                                                         level.gpu_sustain_seconds)
                                         : std::string()));
  const int64_t began = run.timeline.now();
  run.my_gpu_error = measure_gpus(
      run.comm, level, run.my_gpus, [&](const std::function<void()>& body) { run.on_nodes(run.every_node, body); },
      run.timeline, run.out);
  run.timeline.range("accept: gpus", began, run.timeline.now());
  if (run.rank == 0) run.record.measured(run.out);
}

void screen_links(MeasureRun& run) {
  run.buffer.assign(run.level.link_bytes, 1);
  const int64_t began = run.timeline.now();
  if (run.level.link_screen == LinkScreen::all_pairs) {
    screen_every_pair(run);
  } else {
    screen_by_group_testing(run);
  }
  run.timeline.range("accept: links", began, run.timeline.now());
}

// What the first pass left unpassed, once more (docs/accept-reference.md, "Retests"); every figure's verdict is
// then drawn from all its repeats.
void retest_unpassed(MeasureRun& run) {
  const Retests retests = retests_everywhere(run);
  const auto hosts_of = [&](const std::vector<int>& nodes) {
    std::string hosts;
    for (int n : nodes) hosts += (hosts.empty() ? "" : ", ") + run.hosts[static_cast<size_t>(n)];
    return hosts;
  };
  if (!retests.compute.empty())
    run.repeat_on_nodes(run.compute, "retest of " + hosts_of(retests.compute) + ": " + run.compute.stage,
                        "accept: compute retest", retests.compute, run.level.retest_repeats);
  if (!retests.memory.empty())
    run.repeat_on_nodes(run.memory, "retest of " + hosts_of(retests.memory) + ": " + run.memory.stage,
                        "accept: memory retest", retests.memory, run.level.retest_repeats);
  if (!retests.links.empty()) {
    const int64_t began = run.timeline.now();
    const Rounds retest_rounds = rounds_of(retests.links);
    run.measure_links([&](int) { return retest_rounds; }, run.level.retest_repeats,
                      "retest of " + std::to_string(retests.links.size()) +
                          (retests.links.size() == 1 ? " link, " : " links, "),
                      "accept: links retest");
    run.timeline.range("accept: links retest", began, run.timeline.now());
  }
}

void sweep_mpi_collectives(MeasureRun& run) {
  run.out.collectives = measure_collectives(run.comm, run.level, run.progress);
  if (run.rank == 0) run.record.measured(run.out);
}

void sweep_nccl_collectives(MeasureRun& run) {
  if (!run.any_gpu) return;
  measure_nccl_collectives(run.comm, run.level, run.my_gpus, run.my_gpu_error, run.hosts, run.progress, run.timeline,
                           run.out);
  if (run.rank == 0) run.record.measured(run.out);
}

// measure()'s stages, in the order they run; each is collective over the
// run's communicator.
constexpr void (*kStages[])(MeasureRun&) = {take_every_inventory, measure_compute_and_memory, measure_every_gpu,
                                            screen_links,         retest_unpassed,            sweep_mpi_collectives,
                                            sweep_nccl_collectives};

}  // namespace

Measurements measure(MPI_Comm comm, const Level& level, RunTimeline& timeline, RunRecord& record, const Rules& rules,
                     const std::function<Acceptance(const Measurements&)>& judge_so_far) {
  MeasureRun run(comm, level, timeline, record, rules, judge_so_far);
  for (const auto stage : kStages) stage(run);
  return std::move(run.out);
}

}  // namespace rankscope::acceptance
