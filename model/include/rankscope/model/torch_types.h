// PyTorch's names of the data types, both ways: torch's scalar type names
// (record_param_comms' "dtype": "Float", "BFloat16") and the C++ type names
// record_shapes writes in "Input type" ("float", "c10::BFloat16"). The
// Kineto import reads them and the Kineto export writes them, from one table.
#pragma once

#include <string_view>

#include "rankscope/model/event.h"

namespace rankscope {

// kNone for an empty name, kOther for one PyTorch has but rankscope does not.
DataType data_type_from_torch_name(std::string_view name);
DataType data_type_from_cpp_name(std::string_view name);

// The name PyTorch gives the type; empty for kNone, kOther and types it has no name for.
std::string_view torch_name(DataType type);
std::string_view cpp_name(DataType type);

}  // namespace rankscope
