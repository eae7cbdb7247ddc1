// Command-line inputs that may be folders: each folder stands for the files
// in it that a command reads (shards, traces), sorted by name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rankscope {

// Files stay as given; a folder becomes its regular files whose names
// `wanted` accepts. Throws Error naming a folder that cannot be listed or
// holds none, with `what` saying what was looked for (".shard files").
std::vector<std::string> expand_folders(const std::vector<std::string>& inputs, bool (*wanted)(std::string_view name),
                                        std::string_view what);

}  // namespace rankscope
