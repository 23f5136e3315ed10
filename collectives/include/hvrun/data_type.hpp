#pragma once
// Element types and reductions of the collectives, with the names the benchmark and messages use.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace hvrun {

// kFloat16 and kBFloat16 are reduced by NCCL only (GPU buffers); Gloo refuses them.
enum class DataType { kFloat32, kFloat64, kInt32, kInt64, kFloat16, kBFloat16 };
enum class ReduceOp { kSum, kMin, kMax, kProduct };

std::size_t data_type_size(DataType type);
// "float", "double", "int32", "int64", "half", "bfloat16".
const char* data_type_name(DataType type);
// Accepts the names above and "float32", "float64", "int", "float16", "bf16".
std::optional<DataType> parse_data_type(std::string_view name);

// "sum", "min", "max", "prod".
const char* reduce_op_name(ReduceOp op);
// Accepts the names above and "product".
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

template <typename T>
constexpr DataType data_type_of();
template <>
constexpr DataType data_type_of<float>() { return DataType::kFloat32; }
template <>
constexpr DataType data_type_of<double>() { return DataType::kFloat64; }
template <>
constexpr DataType data_type_of<std::int32_t>() { return DataType::kInt32; }
template <>
constexpr DataType data_type_of<std::int64_t>() { return DataType::kInt64; }

// Calls f(T{}) with the C++ type of `type` and returns true; returns false for half and bfloat16,
// which have no host type here (NCCL reduces them on the GPU).
template <typename F>
bool visit_host_type(DataType type, F&& f) {
  switch (type) {
    case DataType::kFloat32: f(float{}); return true;
    case DataType::kFloat64: f(double{}); return true;
    case DataType::kInt32: f(std::int32_t{}); return true;
    case DataType::kInt64: f(std::int64_t{}); return true;
    case DataType::kFloat16:
    case DataType::kBFloat16: break;
  }
  return false;
}

}  // namespace hvrun
