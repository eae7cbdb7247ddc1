// Collective tests of the gathers: run as one process and under mpiexec -n 4.
#include "rankscope/mpi_exchange/gather.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <climits>
#include <string>
#include <vector>

namespace rankscope {
namespace {

int process_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Bytes of process `rank`: a length of its own (none for rank 1), each byte naming its process and place.
std::string bytes_of(int rank) {
  std::string bytes(rank == 1 ? 0 : static_cast<size_t>(7 * rank + 3), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(rank * 31 + static_cast<int>(i));
  return bytes;
}

// A gather larger than MPI's int counts is made of rounds; here rounds of a few bytes stand in for
// 2 GiB ones, each process's bytes spread over several.
TEST(AllgatherBytesTest, RoundsGiveTheBytesOfEveryProcessInOrder) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string expected;
  for (int r = 0; r < size; ++r) expected += bytes_of(r);
  for (const size_t largest_round : {size_t{INT_MAX}, static_cast<size_t>(size), static_cast<size_t>(3 * size + 1)}) {
    const std::vector<char> all = allgather_bytes(MPI_COMM_WORLD, bytes_of(process_rank()), largest_round);
    EXPECT_EQ(std::string(all.begin(), all.end()), expected) << "rounds of at most " << largest_round << " bytes";
  }
  EXPECT_TRUE(allgather_bytes(MPI_COMM_WORLD, "", 1).empty());
}

}  // namespace
}  // namespace rankscope
