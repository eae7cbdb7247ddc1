// gtest main for tests that run as one process or under mpiexec: every
// process runs every test; the first prints as usual, the others only their
// failed assertions, and the exit status is the worst of all processes.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int process) : process_(process) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[process %d] %s:%d: Failure\n%s\n", process_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }

 private:
  int process_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Listing the tests (gtest_discover_tests, at build time) starts no MPI.
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();
  MPI_Init(&argc, &argv);
  int process = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &process);
  if (process != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(process));
  }
  int status = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
