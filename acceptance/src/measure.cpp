#include "rankscope/acceptance/measure.h"

#include <cblas.h>
#include <dlfcn.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>
#include <tuple>
#include <vector>

#include "rankscope/clocksync/sync_mpi.h"
#include "rankscope/merge/mpi_gather.h"
#include "rankscope/model/error.h"
#include "rankscope/model/version.h"

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

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(CPU_COUNT(&set), 1);
}

// One repeat between `peer` and this rank: the slower direction's bandwidth
// and half the shortest round trip of 8 bytes.
std::pair<double, double> measure_link(MPI_Comm comm, int peer, bool lower, const Level& level,
                                       std::vector<char>& buffer, RunTimeline& timeline) {
  constexpr int kTag = 32001;
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
  // The lower rank timed both; it sends its figures to the other so both hold them.
  double figures[2] = {slowest > 0 ? static_cast<double>(buffer.size()) / slowest / 1e9 : 0, shortest / 2 * 1e6};
  if (lower) MPI_Send(figures, 2, MPI_DOUBLE, peer, kTag, comm);
  else MPI_Recv(figures, 2, MPI_DOUBLE, peer, kTag, comm, MPI_STATUS_IGNORE);
  return {figures[0], figures[1]};
}

}  // namespace

Level level_named(std::string_view name) {
  if (name == "quick") return {.gemm_n = 1024, .triad_bytes = 96u << 20, .link_bytes = 4u << 20,
                               .latency_exchanges = 100, .repeats = 9};
  if (name == "full") return {.gemm_n = 2048, .triad_bytes = 768u << 20, .link_bytes = 64u << 20,
                              .latency_exchanges = 1000, .repeats = 15};
  throw Error("level '" + std::string(name) + "' is neither quick nor full");
}

Inventory take_inventory() {
  Inventory inventory;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  inventory.host = host;
  inventory.cpu_model = first_value("/proc/cpuinfo", "model name");
  inventory.cpus = usable_cpus();
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

GemmWorkers::GemmWorkers(int n, int threads) : n_(n), operands_(static_cast<size_t>(threads)) {
  blas().set_threads(1);
  const size_t elements = static_cast<size_t>(n) * static_cast<size_t>(n);
  for (Operands& o : operands_) {
    o.a.resize(elements), o.b.resize(elements), o.c.assign(elements, 0);
    for (size_t i = 0; i < elements; ++i) o.a[i] = static_cast<double>(i % 7) * 0.25, o.b[i] = static_cast<double>(i % 5) * 0.5;
  }
}

void GemmWorkers::run() {
  const Blas& library = blas();
  std::vector<std::thread> workers;
  for (Operands& o : operands_)
    workers.emplace_back([&o, &library, n = n_] {
      library.dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, o.a.data(), n, o.b.data(), n, 0.0,
                    o.c.data(), n);
    });
  for (std::thread& worker : workers) worker.join();
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

double triad_gbps(size_t bytes, int threads) {
  const size_t count = bytes / 3 / sizeof(double);
  std::vector<double> a(count), b(count, 1.0), c(count, 2.0);
  const auto triad = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) a[i] = b[i] + 3.0 * c[i];
  };
  const auto run = [&] {
    std::vector<std::thread> workers;
    const size_t share = count / static_cast<size_t>(threads);
    for (int t = 0; t < threads; ++t)
      workers.emplace_back(triad, share * static_cast<size_t>(t), t + 1 == threads ? count : share * static_cast<size_t>(t + 1));
    for (std::thread& worker : workers) worker.join();
  };
  run();  // pages touched
  const auto start = std::chrono::steady_clock::now();
  run();
  return 3.0 * sizeof(double) * static_cast<double>(count) / seconds_since(start) / 1e9;
}

Measurements measure(MPI_Comm comm, const Level& level, RunTimeline& timeline,
                     const std::function<void(const std::string&)>& progress) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const auto say = [&](const std::string& line) {
    if (rank == 0) progress(line);
  };
  Measurements out;
  say("inventory");
  const Inventory mine = take_inventory();
  const std::vector<std::string> fields = {mine.host, mine.cpu_model, std::to_string(mine.cpus),
                                           std::to_string(mine.memory_bytes), mine.kernel, mine.mpi_library,
                                           mine.rankscope_version};
  // Every node's fields, node by node.
  const std::vector<std::string> gathered = allgather_strings(comm, fields);

  const int threads = mine.cpus;
  // Node by node (one at a time), or all together; every other rank waits idle.
  const auto on_each_node = [&](const std::function<void()>& body) {
    for (int turn = 0; turn < (level.one_at_a_time ? size : 1); ++turn) {
      if (!level.one_at_a_time || turn == rank) body();
      clocksync::idle_barrier(comm);
    }
  };
  std::vector<double> gemm, triad;
  const int64_t compute_began = timeline.now();
  for (int r = 0; r < level.repeats; ++r) {
    say("compute: GEMM " + std::to_string(level.gemm_n) + "^3, repeat " + std::to_string(r + 1) + " of " +
        std::to_string(level.repeats));
    on_each_node([&] {
      const RunTimeline::Range repeat(timeline, "accept: compute repeat " + std::to_string(r + 1));
      gemm.push_back(gemm_gflops(level.gemm_n, threads));
    });
  }
  timeline.range("accept: compute", compute_began, timeline.now());
  const int64_t memory_began = timeline.now();
  for (int r = 0; r < level.repeats; ++r) {
    say("memory: triad over " + std::to_string(level.triad_bytes >> 20) + " MiB, repeat " + std::to_string(r + 1) +
        " of " + std::to_string(level.repeats));
    on_each_node([&] {
      const RunTimeline::Range repeat(timeline, "accept: memory repeat " + std::to_string(r + 1));
      triad.push_back(triad_gbps(level.triad_bytes, threads));
    });
  }
  timeline.range("accept: memory", memory_began, timeline.now());
  // Every node has as many repeats: node n's are at n * repeats.
  const std::vector<double> gemm_all = allgather_rows(comm, gemm), triad_all = allgather_rows(comm, triad);
  const size_t repeats = static_cast<size_t>(level.repeats);
  if (rank == 0)
    for (size_t n = 0; n < static_cast<size_t>(size); ++n) {
      const std::string* field = &gathered[n * fields.size()];
      NodeMeasurements node;
      node.inventory = {field[0], field[1], std::atoi(field[2].c_str()), std::atoll(field[3].c_str()), field[4],
                        field[5], field[6]};
      node.gemm_gflops.assign(gemm_all.begin() + n * repeats, gemm_all.begin() + (n + 1) * repeats);
      node.triad_gbps.assign(triad_all.begin() + n * repeats, triad_all.begin() + (n + 1) * repeats);
      out.nodes.push_back(node);
    }

  const auto rounds = pairing_rounds(size);
  std::vector<char> buffer(level.link_bytes, 1);
  // The links this rank is the lower end of: peer → (bandwidths, latencies).
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> measured_links;
  const int64_t links_began = timeline.now();
  for (int r = 0; r < level.repeats; ++r) {
    const RunTimeline::Range repeat(timeline, "accept: links repeat " + std::to_string(r + 1));
    say("links: repeat " + std::to_string(r + 1) + " of " + std::to_string(level.repeats) + " (" +
        std::to_string(rounds.size()) + " rounds" + (level.one_at_a_time ? ", one link at a time)" : ")"));
    for (const auto& round : rounds) {
      const size_t at_once = level.one_at_a_time ? 1 : std::max<size_t>(round.size(), 1);
      for (size_t first = 0; first < round.size(); first += at_once) {
        for (size_t p = first; p < std::min(first + at_once, round.size()); ++p) {
          const auto [a, b] = round[p];
          if (rank != a && rank != b) continue;
          const auto [bandwidth, latency] = measure_link(comm, rank == a ? b : a, rank == a, level, buffer, timeline);
          if (rank == a) {
            measured_links[b].first.push_back(bandwidth);
            measured_links[b].second.push_back(latency);
          }
        }
        clocksync::idle_barrier(comm);
      }
    }
  }
  timeline.range("accept: links", links_began, timeline.now());
  std::vector<double> my_links;  // per link: this rank, its peer, bandwidths..., latencies...
  for (const auto& [peer, figures] : measured_links) {
    my_links.push_back(rank);
    my_links.push_back(peer);
    my_links.insert(my_links.end(), figures.first.begin(), figures.first.end());
    my_links.insert(my_links.end(), figures.second.begin(), figures.second.end());
  }
  const std::vector<double> all_links = allgather_rows(comm, my_links);
  if (rank == 0) {
    const size_t record = 2 + 2 * repeats;
    for (size_t k = 0; k + record <= all_links.size(); k += record) {
      const double* at = all_links.data() + k;
      LinkMeasurements link;
      link.a = static_cast<int>(at[0]);
      link.b = static_cast<int>(at[1]);
      link.bandwidth_gbps.assign(at + 2, at + 2 + repeats);
      link.latency_us.assign(at + 2 + repeats, at + record);
      out.links.push_back(link);
    }
    std::sort(out.links.begin(), out.links.end(),
              [](const LinkMeasurements& x, const LinkMeasurements& y) { return std::tie(x.a, x.b) < std::tie(y.a, y.b); });
  }
  return out;
}

}  // namespace rankscope::acceptance
