// A fixture for analyses tested on jobs written by hand: shards in a
// temporary folder (written by process 0), merged by every process.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "rankscope/merge/merge.h"
#include "rankscope/model/event.h"

namespace rankscope::testing {

// An event as the agent records it: `kind` named `name` on `track`.
inline Event host_event(EventKind kind, uint32_t name, int64_t begin, int64_t end, uint16_t track) {
  Event e{};
  e.kind = kind;
  e.name_id = name;
  e.begin_ns = begin;
  e.end_ns = end;
  e.track = track;
  e.peer = kNoPeer;
  return e;
}

class ShardJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &process_);
    // One folder for every process of the test: process 0's.
    long pid = ::getpid();
    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    dir_ = std::filesystem::temp_directory_path() / ("rankscope-shard-job-" + std::to_string(pid));
    if (process_ == 0) std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);  // no process reads the folder any more
    if (process_ == 0) std::filesystem::remove_all(dir_);
  }

  // The shards written so far, merged; the timeline's path.
  std::string merged() {
    MPI_Barrier(MPI_COMM_WORLD);
    MergeOptions options;
    options.inputs = {dir_.string()};
    options.output = (dir_ / "job.h5").string();
    options.replace_output = true;  // each test's job in turn
    merge_shards(MPI_COMM_WORLD, options);
    return options.output;
  }

  int process_ = 0;
  std::filesystem::path dir_;
};

}  // namespace rankscope::testing
