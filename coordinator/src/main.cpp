// The `rankscope` command: parses arguments and runs the subcommand given
// (commands/, one file each).
#include <CLI/CLI.hpp>
#include <cstring>
#include <memory>

#include "commands/command.h"
#include "rankscope/model/version.h"

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
                                   cli::add_report(app), cli::add_export(app),        cli::add_run(app, application)};
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    return status == 0 ? 0 : 2;  // a usage error, as for any command-line tool
  }
  for (const cli::Command& command : commands) {
    if (*command.app) return command.run();
  }
  return 2;
}
