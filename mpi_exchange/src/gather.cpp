#include "rankscope/mpi_exchange/gather.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "rankscope/model/error.h"

namespace rankscope {

std::vector<char> allgather_bytes(MPI_Comm comm, const std::string& local, size_t largest_round) {
  int size = 0, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  const auto processes = static_cast<size_t>(size);
  const auto mine = static_cast<uint64_t>(local.size());
  std::vector<uint64_t> lengths(processes);
  MPI_Allgather(&mine, 1, MPI_UINT64_T, lengths.data(), 1, MPI_UINT64_T, comm);
  std::vector<uint64_t> starts(processes);
  std::exclusive_scan(lengths.begin(), lengths.end(), starts.begin(), uint64_t{0});
  const uint64_t total = starts.back() + lengths.back();
  std::vector<char> all(total);
  // MPI counts in int, and thousands of ranks' string tables pass 2 GiB: a larger gather goes in
  // rounds, each process sending at most its share of a round.
  const uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  largest_round = std::min<size_t>(largest_round, INT_MAX);
  const uint64_t share = total <= largest_round ? longest : std::max<uint64_t>(1, largest_round / processes);
  const uint64_t rounds = longest == 0 ? 0 : (longest + share - 1) / share;
  std::vector<char> round_buffer(rounds > 1 ? share * processes : 0);
  std::vector<int> counts(processes), displs(processes);
  for (uint64_t round = 0; round < rounds; ++round) {
    const uint64_t from = round * share;
    for (size_t p = 0; p < processes; ++p)
      counts[p] = static_cast<int>(lengths[p] > from ? std::min(share, lengths[p] - from) : 0);
    std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
    // One round lands in place; of several, each is spread to its processes' places after.
    char* into = rounds == 1 ? all.data() : round_buffer.data();
    MPI_Allgatherv(local.data() + std::min(mine, from), counts[static_cast<size_t>(rank)], MPI_CHAR, into,
                   counts.data(), displs.data(), MPI_CHAR, comm);
    if (rounds == 1) break;
    for (size_t p = 0; p < processes; ++p)
      if (counts[p] > 0) std::memcpy(all.data() + starts[p] + from, into + displs[p], static_cast<size_t>(counts[p]));
  }
  return all;
}

void append_record(std::string& out, std::string_view text) {
  const auto length = static_cast<uint32_t>(text.size());
  out.append(reinterpret_cast<const char*>(&length), 4).append(text);
}

std::vector<std::string> allgather_strings(MPI_Comm comm, std::vector<std::string> local) {
  std::string packed;
  for (const auto& text : local) append_record(packed, text);
  std::vector<std::string>().swap(local);
  const std::vector<char> all = allgather_bytes(comm, packed);
  std::string().swap(packed);
  std::vector<std::string> out;
  for (size_t pos = 0; pos + 4 <= all.size();) {
    uint32_t length = 0;
    std::memcpy(&length, all.data() + pos, 4);
    out.emplace_back(all.data() + pos + 4, length);
    pos += 4 + length;
  }
  return out;
}

void check_all(MPI_Comm comm, const std::string& local_error) {
  int failed = local_error.empty() ? 0 : 1, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, comm);
  if (!any) return;
  std::string message;
  for (const auto& error : allgather_strings(comm, local_error.empty() ? std::vector<std::string>{}
                                                                       : std::vector<std::string>{local_error})) {
    if (!message.empty()) message += "\n";
    message += error;
  }
  throw Error(message);
}

}  // namespace rankscope
