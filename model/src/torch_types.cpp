#include "rankscope/model/torch_types.h"

#include <span>
#include <utility>

namespace rankscope {
namespace {

using Names = std::span<const std::pair<std::string_view, DataType>>;

// Each type's name first; then the names read as it too (bool as a byte).
constexpr std::pair<std::string_view, DataType> kTorchNames[] = {
    {"Char", DataType::kInt8},         {"Byte", DataType::kUint8},          {"Int", DataType::kInt32},
    {"UInt32", DataType::kUint32},     {"Long", DataType::kInt64},          {"UInt64", DataType::kUint64},
    {"Half", DataType::kFloat16},      {"BFloat16", DataType::kBfloat16},   {"Float", DataType::kFloat32},
    {"Double", DataType::kFloat64},    {"Float8_e4m3fn", DataType::kFloat8E4M3},
    {"Float8_e5m2", DataType::kFloat8E5M2}, {"Bool", DataType::kUint8}};
constexpr std::pair<std::string_view, DataType> kCppNames[] = {
    {"signed char", DataType::kInt8},          {"unsigned char", DataType::kUint8},
    {"int", DataType::kInt32},                 {"unsigned int", DataType::kUint32},
    {"long int", DataType::kInt64},            {"long unsigned int", DataType::kUint64},
    {"c10::Half", DataType::kFloat16},         {"c10::BFloat16", DataType::kBfloat16},
    {"float", DataType::kFloat32},             {"double", DataType::kFloat64},
    {"c10::Float8_e4m3fn", DataType::kFloat8E4M3}, {"c10::Float8_e5m2", DataType::kFloat8E5M2},
    {"bool", DataType::kUint8}};

DataType type_named(Names names, std::string_view name) {
  for (const auto& [text, type] : names) {
    if (name == text) return type;
  }
  return name.empty() ? DataType::kNone : DataType::kOther;
}

std::string_view name_of(Names names, DataType type) {
  for (const auto& [text, named] : names) {
    if (named == type) return text;
  }
  return "";
}

}  // namespace

DataType data_type_from_torch_name(std::string_view name) { return type_named(kTorchNames, name); }
DataType data_type_from_cpp_name(std::string_view name) { return type_named(kCppNames, name); }
std::string_view torch_name(DataType type) { return name_of(kTorchNames, type); }
std::string_view cpp_name(DataType type) { return name_of(kCppNames, type); }

}  // namespace rankscope
