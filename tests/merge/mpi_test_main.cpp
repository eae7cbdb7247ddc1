// gtest main for tests that run as one process or under mpiexec: every
// process runs every test; only the first prints, and the exit status is the
// worst of all processes.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int process = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  if (process != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int status = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
