// Collectives that every process of a communicator ends with the same
// answer from: byte records, strings, rows, and errors. The merge agrees on
// a job's layout with them, the importer on its traces, accept on its nodes.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace rankscope {

// Every process's bytes, in process order. MPI counts a gather's bytes in
// int; one larger than `largest_round` (at least the process count, at most
// INT_MAX, the same on every process) is gathered in rounds of at most that
// many.
std::vector<char> allgather_bytes(MPI_Comm comm, const std::string& local, size_t largest_round = INT_MAX);

// Appends a length-prefixed record, as allgather_strings reads them.
void append_record(std::string& out, std::string_view text);

// Every process's strings, in process order. `local` is let go of once
// packed, and the packed bytes once sent: a job's string table is the
// merge's largest (a trace of a million names).
std::vector<std::string> allgather_strings(MPI_Comm comm, std::vector<std::string> local);

// Throws the same Error on every process when any of them failed.
void check_all(MPI_Comm comm, const std::string& local_error);

template <typename Row>
std::vector<Row> allgather_rows(MPI_Comm comm, const std::vector<Row>& local) {
  // An empty vector's data() may be null, which memcpy must not be given even for no bytes.
  const std::string bytes =
      local.empty() ? std::string() : std::string(reinterpret_cast<const char*>(local.data()), local.size() * sizeof(Row));
  const std::vector<char> all = allgather_bytes(comm, bytes);
  std::vector<Row> rows(all.size() / sizeof(Row));
  if (!rows.empty()) std::memcpy(rows.data(), all.data(), rows.size() * sizeof(Row));
  return rows;
}

}  // namespace rankscope
