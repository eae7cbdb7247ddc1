// Input files and folders as commands take them, and the temporary paths
// commands make for themselves.
#include "rankscope/model/input_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <csignal>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "rankscope/model/error.h"
#include "rankscope/model/shard.h"
#include "rankscope/model/temporary_paths.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;

class InputFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rankscope-input-files-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  void write(const char* name) const { std::ofstream(path(name)) << "x"; }
  std::string error_of(const std::vector<std::string>& inputs) const {
    try {
      expand_folders(inputs, is_shard_file, ".shard files");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(InputFiles, FifosAreRefusedByName) {
  ASSERT_EQ(::mkfifo(path("rank-00000.shard").c_str(), 0600), 0);
  EXPECT_EQ(error_of({path("rank-00000.shard")}),
            "cannot read " + path("rank-00000.shard") + ": it is a FIFO (named pipe), not a regular file");
  EXPECT_THROW(require_regular_file("/dev/null"), Error);
  // In a folder, only regular files count.
  write("rank-00001.shard");
  EXPECT_EQ(expand_folders({dir_.string()}, is_shard_file, ".shard files"),
            std::vector<std::string>{path("rank-00001.shard")});
}

TEST_F(InputFiles, RegularFilesAndMissingOnesPass) {
  write("rank-00000.shard");
  EXPECT_NO_THROW(require_regular_file(path("rank-00000.shard")));
  // The reader names a missing file in its own words.
  EXPECT_NO_THROW(require_regular_file(path("absent.shard")));
  EXPECT_EQ(expand_folders({path("absent.shard")}, is_shard_file, ".shard files"),
            std::vector<std::string>{path("absent.shard")});
}

TEST_F(InputFiles, FileTypesInWords) {
  EXPECT_STREQ(file_type_name(S_IFDIR), "a folder");
  EXPECT_STREQ(file_type_name(S_IFREG), "a regular file");
  EXPECT_STREQ(file_type_name(S_IFCHR), "a character device");
  EXPECT_STREQ(file_type_name(S_IFSOCK), "a socket");
}

TEST_F(InputFiles, TemporaryPathsGoWithTheirOwner) {
  {
    const TemporaryPath folder(path("job.h5.import-1"));
    fs::create_directories(folder.path() + "/inside");
    std::ofstream(folder.path() + "/inside/trace-0.shard") << "x";
    const TemporaryPath never_made(path("job.h5.partial"));
  }
  EXPECT_FALSE(fs::exists(path("job.h5.import-1")));
}

// A process ended by SIGTERM says its last words (with its temporary paths
// still there, so that what it says can be written beside them), then the
// paths go and the process dies by the signal.
TEST_F(InputFiles, LastWordsComeBeforeTheTemporaryPathsGo) {
  const std::string partial = path("page.html.partial"), words = path("words"), ready = path("ready");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    remove_temporary_paths_on_signals();
    const TemporaryPath temporary(partial);
    std::ofstream(partial) << "x";
    const LastWords last_words([&](int signal_number) {
      std::ofstream(words) << signal_number << (fs::exists(partial) ? " with" : " without") << " the partial file";
    });
    std::ofstream(ready) << "x";
    for (;;) ::pause();
  }
  for (int i = 0; i < 500 && !fs::exists(ready); ++i) ::usleep(10'000);
  ASSERT_TRUE(fs::exists(ready));
  ::kill(child, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  std::ifstream said(words);
  std::string text((std::istreambuf_iterator<char>(said)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, std::to_string(SIGTERM) + " with the partial file");
  EXPECT_FALSE(fs::exists(partial));
}

// The threads of a process ended by SIGTERM stop before its temporary paths
// go: one still writing into its folder (re-making it, even) leaves nothing.
TEST_F(InputFiles, ASignalRemovesAFolderStillBeingWritten) {
  const std::string folder = path("job.h5.import-busy"), ready = path("busy");
  for (int round = 0; round < 20; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      remove_temporary_paths_on_signals();
      const TemporaryPath temporary(folder);
      std::thread writer([&] {
        for (long n = 0;; ++n) {
          std::error_code ignored;
          fs::create_directories(folder + "/nested/" + std::to_string(n % 7), ignored);
          std::ofstream(folder + "/nested/" + std::to_string(n % 7) + "/shard-" + std::to_string(n)) << "x";
          if (n == 50) std::ofstream(ready) << "x";
        }
      });
      writer.join();
      std::_Exit(0);
    }
    for (int i = 0; i < 500 && !fs::exists(ready); ++i) ::usleep(2'000);
    ASSERT_TRUE(fs::exists(ready));
    ::usleep(static_cast<useconds_t>(round * 500));
    ::kill(child, SIGTERM);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
    ASSERT_FALSE(fs::exists(folder)) << "round " << round;
    fs::remove(ready);
  }
}

}  // namespace
}  // namespace rankscope
