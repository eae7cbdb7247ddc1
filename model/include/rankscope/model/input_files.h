// Command-line inputs that may be folders: each folder stands for the files
// in it that a command reads (shards, traces), sorted by name.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace rankscope {

// Files stay as given; a folder becomes its regular files whose names
// `wanted` accepts. Throws Error naming a folder that cannot be listed or
// holds none, with `what` saying what was looked for (".shard files"), and
// naming a given file that is not a regular file (require_regular_file).
std::vector<std::string> expand_folders(const std::vector<std::string>& inputs, bool (*wanted)(std::string_view name),
                                        std::string_view what);

// Throws Error naming `path` when it exists and is not a regular file: a
// FIFO, a device or a socket would block its reader forever or never end,
// and a folder is no file. A path that does not exist passes: its reader
// says so in its own words.
void require_regular_file(const std::string& path);

// What a file of `mode` (struct stat's st_mode) is, in words: "a folder",
// "a FIFO (named pipe)", "a regular file".
const char* file_type_name(mode_t mode);

}  // namespace rankscope
