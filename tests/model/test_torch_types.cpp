// PyTorch's data type names, read by the Kineto import and written by the export.
#include <gtest/gtest.h>

#include "rankscope/model/torch_types.h"

namespace rankscope {
namespace {

TEST(TorchTypes, EveryNamedTypeReadsBackAsItself) {
  int named = 0;
  for (unsigned t = 0; t < kDataTypeCount; ++t) {
    const auto type = static_cast<DataType>(t);
    if (!torch_name(type).empty()) {
      EXPECT_EQ(data_type_from_torch_name(torch_name(type)), type) << torch_name(type);
      EXPECT_EQ(data_type_from_cpp_name(cpp_name(type)), type) << cpp_name(type);
      ++named;
    }
  }
  EXPECT_EQ(named, 12);
  EXPECT_EQ(torch_name(DataType::kBfloat16), "BFloat16");
  EXPECT_EQ(cpp_name(DataType::kInt64), "long int");
}

TEST(TorchTypes, BoolReadsAsAByteAndUnknownNamesAsOther) {
  EXPECT_EQ(data_type_from_torch_name("Bool"), DataType::kUint8);
  EXPECT_EQ(data_type_from_cpp_name("bool"), DataType::kUint8);
  EXPECT_EQ(torch_name(DataType::kUint8), "Byte");
  EXPECT_EQ(data_type_from_torch_name("ComplexFloat"), DataType::kOther);
  EXPECT_EQ(data_type_from_torch_name(""), DataType::kNone);
  EXPECT_EQ(torch_name(DataType::kNone), "");
  EXPECT_EQ(cpp_name(DataType::kOther), "");
}

}  // namespace
}  // namespace rankscope
