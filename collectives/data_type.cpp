#include "hvrun/data_type.hpp"

namespace hvrun {

std::size_t data_type_size(DataType type) {
  switch (type) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
  }
  return 0;
}

const char* data_type_name(DataType type) {
  switch (type) {
    case DataType::kFloat32: return "float";
    case DataType::kFloat64: return "double";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kFloat16: return "half";
    case DataType::kBFloat16: return "bfloat16";
  }
  return "unknown";
}

std::optional<DataType> parse_data_type(std::string_view name) {
  if (name == "float" || name == "float32") return DataType::kFloat32;
  if (name == "double" || name == "float64") return DataType::kFloat64;
  if (name == "int32" || name == "int") return DataType::kInt32;
  if (name == "int64") return DataType::kInt64;
  if (name == "half" || name == "float16") return DataType::kFloat16;
  if (name == "bfloat16" || name == "bf16") return DataType::kBFloat16;
  return std::nullopt;
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "prod";
  }
  return "unknown";
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  if (name == "sum") return ReduceOp::kSum;
  if (name == "min") return ReduceOp::kMin;
  if (name == "max") return ReduceOp::kMax;
  if (name == "prod" || name == "product") return ReduceOp::kProduct;
  return std::nullopt;
}

}  // namespace hvrun
