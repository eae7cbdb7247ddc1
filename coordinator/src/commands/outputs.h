// What a command reads and writes, checked before it writes anything, so
// that no mistake on the command line destroys data (docs/cli.md, "Inputs
// and outputs").
#pragma once

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/model/temporary_paths.h"

namespace rankscope::cli {

// The kinds of file rankscope writes; an existing file is replaced only by
// a file of its own kind.
enum class OutputKind {
  kTimeline,
  kPerfetto,
  kChromeJson,
  kReportText,
  kReportJson,
  kReportHtml,
  kAcceptText,
  kAcceptJson,
  kAcceptHtml,
  kAcceptBaseline,
  kReportBaseline,
  kDiffText,
  kDiffJson,
  kDiffHtml,
  // Folders: a torch.profiler trace per rank (export --kineto), an OTF2
  // archive (export --otf2).
  kKinetoFolder,
  kOtf2Folder
};

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

// Runs `body` on process 0 of `comm` alone (a check of files: one answer,
// said once; a file only it writes). The Error it throws is thrown on every
// process, so that none goes on alone or waits for it forever.
void run_on_process_0(MPI_Comm comm, const std::function<void()>& body);

// Before the processes of `comm` write the timeline `output` (given by the
// command's `option`, which errors name) from `inputs`:
// check_files on process 0 (run_on_process_0); then, on process 0, what
// removes OUTPUT.partial should the process end before the timeline is
// complete.
std::unique_ptr<TemporaryPath> prepare_timeline_output(MPI_Comm comm, const std::vector<std::string>& inputs,
                                                       const std::string& option, const std::string& output,
                                                       bool overwrite);

// A text output (a report, an acceptance summary) replaced all or nothing.
// Made before the work that fills it: OUTPUT.partial is created at once, so
// that a folder that is missing or cannot be written stops the command
// before it computes anything; it is removed if the command ends (an error,
// a signal) before write().
class TextOutput {
 public:
  // Unless `replace`, an OUTPUT that appears meanwhile is not written over
  // (move_into_place). Throws Error naming OUTPUT.partial.
  TextOutput(std::string output, bool replace);
  // Writes `text` to OUTPUT.partial and moves it into place as OUTPUT; throws Error naming the file.
  void write(std::string_view text);

 private:
  std::string output_;
  bool replace_ = false;
  TemporaryPath partial_;
};

// `--overwrite`/`-f`, for commands that write files.
void add_overwrite_flag(CLI::App& app, bool& overwrite);

// `--format text|json|html`, `-o/--output` and `-f/--overwrite`, for
// commands that print one document, their `what` ("report", "summary"), or
// write it to a file.
void add_document_options(CLI::App& app, const std::string& what, std::string& format, std::string& output,
                          bool& overwrite);

// Where the merge and the exporters write OUTPUT until it is complete.
std::string partial_path(const std::string& output);

}  // namespace rankscope::cli
