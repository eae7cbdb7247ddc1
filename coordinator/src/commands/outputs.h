// What a command reads and writes, checked before it writes anything, so
// that no mistake on the command line destroys data (docs/cli.md, "Inputs
// and outputs").
#pragma once

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "rankscope/model/temporary_paths.h"

namespace rankscope::cli {

// The kinds of file rankscope writes; an existing file is replaced only by
// a file of its own kind.
enum class OutputKind { kTimeline, kPerfetto, kChromeJson, kReportText, kReportJson, kReportHtml };

struct Output {
  std::string option;  // as on the command line: "-o", "--perfetto"
  std::string path;
  OutputKind kind;
};

// Throws Error naming the file unless every input that exists is a regular
// file and every output may be written: it is none of the inputs (after
// links are followed, and inputs found in folders included), no other
// output shares its path, and where it exists, `overwrite` was given and it
// is an earlier output of its kind (or empty).
void check_files(const std::vector<std::string>& inputs, const std::vector<Output>& outputs, bool overwrite);

// Before the processes of `comm` write the timeline `output` from `inputs`:
// check_files by process 0, whose Error every process throws, so none goes
// on alone; then, on process 0, what removes OUTPUT.partial should the
// process end before the timeline is complete.
std::unique_ptr<TemporaryPath> prepare_timeline_output(MPI_Comm comm, const std::vector<std::string>& inputs,
                                                       const std::string& output, bool overwrite);

// `--overwrite`/`-f`, for commands that write files.
void add_overwrite_flag(CLI::App& app, bool& overwrite);

// Where the merge and the exporters write OUTPUT until it is complete.
std::string partial_path(const std::string& output);

}  // namespace rankscope::cli
