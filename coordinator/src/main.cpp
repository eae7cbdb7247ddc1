// The `rankscope` command: parses arguments and runs the subcommand given
// (commands/, one file each).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <memory>

#include "commands/command.h"
#include "rankscope/model/version.h"

namespace {

// Exit statuses (docs/cli.md): 1 is every other error.
constexpr int kUsageError = 2;

// The message of a usage error, named after the command it concerns.
int usage_error(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "%s: %s\nRun '%s --help' for more information.\n", command.c_str(), message.c_str(),
               command.c_str());
  return kUsageError;
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = rankscope::cli;
  CLI::App app{"rankscope: profile multi-node GPU jobs on one clock-aligned timeline"};
  app.set_version_flag("--version", std::string("rankscope ") + rankscope::kRankscopeVersion);
  app.require_subcommand(1);

  // `run`'s application starts after the first `--` and is never parsed: its
  // arguments are its own, whatever they look like.
  auto application = std::make_shared<std::vector<std::string>>();
  int parsed_argc = argc;
  if (argc > 1 && std::strcmp(argv[1], "run") == 0) {
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--") != 0) continue;
      application->assign(argv + i + 1, argv + argc);
      parsed_argc = i;
      break;
    }
  }
  const cli::Command commands[] = {cli::add_merge(app),  cli::add_import_kineto(app), cli::add_info(app),
                                   cli::add_report(app), cli::add_diff(app), cli::add_export(app),        cli::add_run(app, application),
                                   cli::add_accept(app), cli::add_trigger(app)};
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const cli::Command& command : commands) {
      known += (known.empty() ? "" : ", ") + command.app->get_name();
      found = found || command.app->check_name(argv[1]);
    }
    if (!found) return usage_error("rankscope", std::string("unknown command '") + argv[1] + "' (commands: " + known + ")");
  }
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    for (const cli::Command& command : commands) {
      if (command.app->parsed()) return usage_error("rankscope " + command.app->get_name(), e.what());
    }
    return usage_error("rankscope", e.what());
  }
  for (const cli::Command& command : commands) {
    if (*command.app) return command.run();
  }
  return kUsageError;
}
