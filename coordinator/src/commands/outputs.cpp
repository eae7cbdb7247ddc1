#include "outputs.h"

#include <hdf5.h>
#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <regex>
#include <string_view>

#include "command.h"
#include "rankscope/model/error.h"
#include "rankscope/model/input_files.h"
#include "rankscope/mpi_exchange/gather.h"
#include "rankscope/timeline/schema.h"
#include "rankscope/timeline/timeline.h"

namespace rankscope::cli {
namespace {

namespace fs = std::filesystem;

// Enough of a file's start to know what wrote it (a report's first line
// holds the timeline's path).
constexpr size_t kHeadBytes = 8192;
constexpr size_t kLongestOutputSuffix = sizeof(".import-XXXXXX") - 1;

std::string read_head(const std::string& path) {
  std::string head(kHeadBytes, '\0');
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return {};
  head.resize(std::fread(head.data(), 1, head.size(), file));
  std::fclose(file);
  return head;
}

std::string_view first_line(std::string_view text) { return text.substr(0, text.find('\n')); }

// An HDF5 file whose root carries rankscope's format attribute, as the merge writes it.
bool is_timeline(const std::string& path) {
  schema::silence_hdf5_errors();
  const schema::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.valid() || H5Aexists(file, "format") <= 0) return false;
  const schema::Handle attribute(H5Aopen(file, "format", H5P_DEFAULT), H5Aclose);
  const schema::Handle type(attribute.valid() ? H5Aget_type(attribute) : -1, H5Tclose);
  if (!type.valid() || H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) != 0) return false;
  std::string text(H5Tget_size(type), '\0');
  if (H5Aread(attribute, type, text.data()) < 0) return false;
  return std::string_view(text.c_str()) == kTimelineFormatName;
}

// Protobuf varints, as the Perfetto exporter writes them.
bool skip_varint(std::string_view& bytes) {
  for (size_t i = 0; i < bytes.size() && i < 10; ++i) {
    if ((static_cast<unsigned char>(bytes[i]) & 0x80) == 0) {
      bytes.remove_prefix(i + 1);
      return true;
    }
  }
  return false;
}

bool take_byte(std::string_view& bytes, unsigned char expected) {
  if (bytes.empty() || static_cast<unsigned char>(bytes[0]) != expected) return false;
  bytes.remove_prefix(1);
  return true;
}

// The exporter's first packet: Trace.packet (field 1, length-delimited), its
// timestamp (field 8), its sequence (field 10), then the sequence flags (field 13).
bool is_perfetto(const std::string& path) {
  const std::string head = read_head(path);
  std::string_view bytes = head;
  return take_byte(bytes, 0x0a) && skip_varint(bytes) && take_byte(bytes, 0x40) && skip_varint(bytes) &&
         take_byte(bytes, 0x50) && skip_varint(bytes) && take_byte(bytes, 0x68);
}

bool is_chrome_json(const std::string& path) {
  return read_head(path).starts_with(R"({"displayTimeUnit":"ns","otherData":{"timeline":")");
}

// A text output, known by its first line.
bool first_line_has(const std::string& path, const std::regex& pattern) {
  const std::string head = read_head(path);
  const std::string_view line = first_line(head);
  return std::regex_search(line.begin(), line.end(), pattern);
}

bool is_report_text(const std::string& path) {
  static const std::regex summary(": [0-9]+ ranks, [0-9]+ steps, mean step ");
  return first_line_has(path, summary);
}

bool is_report_json(const std::string& path) {
  const std::string head = read_head(path);
  return head.starts_with(R"({"file":")") && first_line(head).find(R"(","world_size":)") != std::string_view::npos;
}

// A page of model/html.h, known by the start of its title.
bool is_html_titled(const std::string& path, std::string_view title_start) {
  const std::string head = read_head(path);
  return head.starts_with("<!DOCTYPE html>\n") && head.find("<title>" + std::string(title_start)) != std::string::npos;
}

bool is_report_html(const std::string& path) { return is_html_titled(path, "rankscope report: "); }

bool is_accept_text(const std::string& path) {
  static const std::regex summary("^acceptance: (PASS|FAIL) \\([0-9]+ of [0-9]+ nodes and [0-9]+ of [0-9]+ links accepted\\)$");
  return first_line_has(path, summary);
}

bool is_accept_json(const std::string& path) {
  const std::string head = read_head(path);
  return head.starts_with(R"({"verdict":"pass","cut_short":)") || head.starts_with(R"({"verdict":"fail","cut_short":)");
}

bool is_accept_html(const std::string& path) { return is_html_titled(path, "rankscope acceptance: "); }

// acceptance::baseline_text's: its header is the second line, after a comment.
bool is_accept_baseline(const std::string& path) {
  return read_head(path).find("\nrankscope-accept-baseline ") != std::string::npos;
}

// analysis::baseline_text's, and rankscope diff's outputs, by their first line.
bool is_report_baseline(const std::string& path) { return read_head(path).starts_with("rankscope-baseline "); }
bool is_diff_text(const std::string& path) { return read_head(path).starts_with("base "); }
bool is_diff_json(const std::string& path) { return read_head(path).starts_with(R"({"base":")"); }
bool is_diff_html(const std::string& path) { return is_html_titled(path, "rankscope diff: "); }

// A folder export --kineto wrote: only rank-N.pt.trace.json files, each
// begun as the exporter begins them.
bool is_kineto_folder(const std::string& path) {
  static const std::regex name("rank-[0-9]+\\.pt\\.trace\\.json");
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(path, error)) {
    if (!std::regex_match(entry.path().filename().string(), name) || !entry.is_regular_file(error) ||
        !read_head(entry.path().string()).starts_with(R"({"schemaVersion":1,"rankscopeTimeline":")")) {
      return false;
    }
  }
  return !error;
}

// An OTF2 archive as export --otf2 writes it: the anchor file, the global
// definitions and the folder of local ones, nothing else.
bool is_otf2_folder(const std::string& path) {
  std::error_code error;
  bool anchor = false;
  for (const auto& entry : fs::directory_iterator(path, error)) {
    const std::string name = entry.path().filename().string();
    if (name == "traces.otf2") {
      anchor = entry.is_regular_file(error);
    } else if (name != "traces.def" && name != "traces") {
      return false;
    }
  }
  return anchor && !error;
}

struct KindTraits {
  const char* name;
  bool (*recognise)(const std::string& path);
};

KindTraits traits(OutputKind kind) {
  switch (kind) {
    case OutputKind::kTimeline: return {"a rankscope timeline", is_timeline};
    case OutputKind::kPerfetto: return {"a Perfetto trace written by rankscope", is_perfetto};
    case OutputKind::kChromeJson: return {"a Chrome JSON trace written by rankscope", is_chrome_json};
    case OutputKind::kReportText: return {"a rankscope text report", is_report_text};
    case OutputKind::kReportJson: return {"a rankscope JSON report", is_report_json};
    case OutputKind::kReportHtml: return {"a rankscope HTML report", is_report_html};
    case OutputKind::kAcceptText: return {"a rankscope accept text summary", is_accept_text};
    case OutputKind::kAcceptJson: return {"a rankscope accept JSON summary", is_accept_json};
    case OutputKind::kAcceptHtml: return {"a rankscope accept HTML page", is_accept_html};
    case OutputKind::kAcceptBaseline: return {"a rankscope accept baseline", is_accept_baseline};
    case OutputKind::kReportBaseline: return {"a rankscope baseline", is_report_baseline};
    case OutputKind::kDiffText: return {"a rankscope diff", is_diff_text};
    case OutputKind::kDiffJson: return {"a rankscope JSON diff", is_diff_json};
    case OutputKind::kDiffHtml: return {"a rankscope HTML diff", is_diff_html};
    case OutputKind::kKinetoFolder: return {"a folder of torch.profiler traces written by rankscope", is_kineto_folder};
    case OutputKind::kOtf2Folder: return {"an OTF2 archive written by rankscope", is_otf2_folder};
  }
  return {"", nullptr};
}

std::optional<struct stat> stat_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Whether two outputs would land in one file, whether or not it exists yet.
bool same_path(const std::string& a, const std::string& b) {
  const auto a_stat = stat_of(a), b_stat = stat_of(b);
  if (a_stat && b_stat) return same_file(*a_stat, *b_stat);
  std::error_code ignored;
  return fs::weakly_canonical(fs::absolute(a), ignored) == fs::weakly_canonical(fs::absolute(b), ignored);
}

bool is_folder_kind(OutputKind kind) { return kind == OutputKind::kKinetoFolder || kind == OutputKind::kOtf2Folder; }

// An output folder that exists: empty, or (with overwrite) an earlier one of its kind.
void check_output_folder(const Output& output, const struct stat& existing, bool overwrite) {
  const KindTraits kind = traits(output.kind);
  const std::string what = output.path + " (" + output.option + ") exists and is ";
  if (!S_ISDIR(existing.st_mode)) {
    throw Error(what + file_type_name(existing.st_mode) + ", not a folder: it is not replaced");
  }
  std::error_code error;
  const bool empty = fs::is_empty(output.path, error);
  if (error) throw Error(output.path + " (" + output.option + "): cannot read the folder: " + error.message());
  if (empty) return;
  if (!kind.recognise(output.path)) {
    throw Error(what + "a folder that holds files other than " + kind.name +
                ": it is not replaced; choose an empty or new folder");
  }
  if (!overwrite) throw Error(what + kind.name + ": give --overwrite (-f) to replace it");
}

void check_output(const Output& output, const std::vector<std::string>& inputs, bool overwrite) {
  if (!output.path.empty() && output.path.back() == '/' && !is_folder_kind(output.kind)) {
    throw Error(output.path + " (" + output.option + ") names a folder (it ends in /), not a file: choose a file");
  }
  // Names rankscope adds to an output's (OUTPUT.partial, OUTPUT.shards,
  // OUTPUT.import-XXXXXX) must fit the file system's limits too: found now,
  // not after the job.
  const std::string name = fs::path(output.path).filename().string();
  if (name.size() + kLongestOutputSuffix > NAME_MAX || output.path.size() + kLongestOutputSuffix >= PATH_MAX) {
    throw Error(output.path.substr(0, 64) + "... (" + output.option + "): a name of " + std::to_string(name.size()) +
                " bytes in a path of " + std::to_string(output.path.size()) + " is too long once rankscope adds " +
                std::to_string(kLongestOutputSuffix) + " bytes for its temporary files (the limits: " +
                std::to_string(NAME_MAX) + " bytes a name, " + std::to_string(PATH_MAX) + " a path)");
  }
  const auto existing = stat_of(output.path);
  if (!existing) {
    struct stat link {};
    if (::lstat(output.path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
      std::error_code ignored;
      throw Error(output.path + " (" + output.option + ") is a symbolic link to " +
                  fs::read_symlink(output.path, ignored).string() +
                  ", which does not exist: rankscope does not write through it; remove it or choose another file");
    }
    return;
  }
  for (const std::string& input : inputs) {
    const auto input_stat = stat_of(input);
    if (input_stat && same_file(*existing, *input_stat)) {
      throw Error(output.path + " (" + output.option + ") is " +
                  (input == output.path ? "an input" : "the input " + input) +
                  " of this command: it is not written over; choose another file");
    }
  }
  if (is_folder_kind(output.kind)) return check_output_folder(output, *existing, overwrite);
  const KindTraits kind = traits(output.kind);
  const std::string what = output.path + " (" + output.option + ") exists and is ";
  if (!S_ISREG(existing->st_mode)) {
    throw Error(what + file_type_name(existing->st_mode) + ", not " + kind.name + ": it is not replaced");
  }
  // An empty file holds nothing to lose (a name made by mktemp, say).
  if (existing->st_size > 0 && !kind.recognise(output.path)) {
    throw Error(what + "not " + kind.name + ": it is not replaced; remove it or choose another file");
  }
  if (!overwrite) {
    throw Error(what + (existing->st_size == 0 ? "empty" : kind.name) + ": give --overwrite (-f) to replace it");
  }
}

}  // namespace

void check_files(const std::vector<std::string>& inputs, const std::vector<Output>& outputs, bool overwrite) {
  for (const std::string& input : inputs) require_regular_file(input);
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (same_path(outputs[i].path, outputs[j].path)) {
        throw Error(outputs[j].option + " and " + outputs[i].option + " both name " + outputs[i].path +
                    ": each output needs a file of its own");
      }
    }
    check_output(outputs[i], inputs, overwrite);
  }
}

void run_on_process_0(MPI_Comm comm, const std::function<void()>& body) {
  int process = 0;
  MPI_Comm_rank(comm, &process);
  std::string error;
  try {
    if (process == 0) body();
  } catch (const Error& e) {
    error = e.what();
  }
  check_all(comm, error);
}

std::unique_ptr<TemporaryPath> prepare_timeline_output(MPI_Comm comm, const std::vector<std::string>& inputs,
                                                       const std::string& option, const std::string& output,
                                                       bool overwrite) {
  run_on_process_0(comm, [&] { check_files(inputs, {{option, output, OutputKind::kTimeline}}, overwrite); });
  int process = 0;
  MPI_Comm_rank(comm, &process);
  return process == 0 ? std::make_unique<TemporaryPath>(partial_path(output)) : nullptr;
}

TextOutput::TextOutput(std::string output, bool replace)
    : output_(std::move(output)), replace_(replace), partial_(partial_path(output_)) {
  std::FILE* file = std::fopen(partial_.path().c_str(), "w");
  if (!file) throw Error("cannot write " + partial_.path() + ": " + errno_text(errno));
  std::fclose(file);
}

void TextOutput::write(std::string_view text) {
  std::FILE* file = std::fopen(partial_.path().c_str(), "w");
  if (!file) throw Error("cannot write " + partial_.path() + ": " + errno_text(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  if (std::fclose(file) != 0 || !written) throw Error("cannot write " + partial_.path() + ": " + errno_text(errno));
  move_into_place(partial_.path(), output_, replace_);
}

void add_overwrite_flag(CLI::App& app, bool& overwrite) {
  app.add_flag("-f,--overwrite", overwrite,
               "Replace an existing output, if it is an earlier output of the same kind (never an input)");
}

void add_document_options(CLI::App& app, const std::string& what, std::string& format, std::string& output,
                          bool& overwrite) {
  app.add_option("--format", format, "text (one screen), json or html (one self-contained page)")
      ->check(CLI::IsMember({"text", "json", "html"}))
      ->capture_default_str();
  app.add_option("-o,--output", output, "Write the " + what + " to this file instead of stdout")->check(kNonEmptyPath);
  add_overwrite_flag(app, overwrite);
}

std::string partial_path(const std::string& output) { return output + ".partial"; }

}  // namespace rankscope::cli
