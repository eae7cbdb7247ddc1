#include "rankscope/merge/mpi_gather.h"

#include <numeric>

#include "rankscope/model/error.h"

namespace rankscope {

std::vector<char> allgather_bytes(MPI_Comm comm, const std::string& local) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  const int mine = static_cast<int>(local.size());
  std::vector<int> counts(size), displs(size);
  MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
  std::vector<char> all(static_cast<size_t>(displs.back() + counts.back()));
  MPI_Allgatherv(local.data(), mine, MPI_CHAR, all.data(), counts.data(), displs.data(), MPI_CHAR, comm);
  return all;
}

void append_record(std::string& out, std::string_view text) {
  const auto length = static_cast<uint32_t>(text.size());
  out.append(reinterpret_cast<const char*>(&length), 4).append(text);
}

std::vector<std::string> allgather_strings(MPI_Comm comm, const std::vector<std::string>& local) {
  std::string packed;
  for (const auto& text : local) append_record(packed, text);
  const std::vector<char> all = allgather_bytes(comm, packed);
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
