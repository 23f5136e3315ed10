#include "collectives/bench_plan.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>

#include "common/error.hpp"

namespace hvrun::bench {

namespace {

template <typename F>
void with_host_type(DataType type, F&& f) {
  if (visit_host_type(type, std::forward<F>(f))) return;
  throw UsageError(std::string("the benchmark does not check ") + data_type_name(type) + " results");
}

}  // namespace

std::uint64_t parse_byte_size(std::string_view text) {
  const std::string original(text);
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data())
    throw UsageError("'" + original + "' is not a byte size (examples: 8, 512K, 64M, 1G)");
  std::string unit(end, text.data() + text.size());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::toupper(c); });
  if (unit.ends_with("IB")) unit.resize(unit.size() - 2);
  else if (unit.size() > 1 && unit.ends_with("B")) unit.resize(unit.size() - 1);
  std::uint64_t scale = 1;
  if (unit == "K") scale = 1ull << 10;
  else if (unit == "M") scale = 1ull << 20;
  else if (unit == "G") scale = 1ull << 30;
  else if (!unit.empty() && unit != "B")
    throw UsageError("'" + original + "': unknown unit (use K, M or G)");
  if (value > (std::uint64_t{1} << 50) / scale) throw UsageError("'" + original + "' is too large");
  return value * scale;
}

std::vector<std::uint64_t> sweep(std::uint64_t min_bytes, std::uint64_t max_bytes, std::uint64_t factor) {
  if (min_bytes == 0) throw UsageError("the smallest size (-b) must be at least 1 byte");
  if (min_bytes > max_bytes)
    throw UsageError("the smallest size (-b " + std::to_string(min_bytes) + ") exceeds the largest (-e " +
                     std::to_string(max_bytes) + ")");
  if (factor < 2) throw UsageError("the step factor (-f) must be at least 2");
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t s = min_bytes; s <= max_bytes; s *= factor) {
    sizes.push_back(s);
    if (s > max_bytes / factor) break;
  }
  return sizes;
}

double bus_bandwidth(double algbw, int ranks) {
  return ranks <= 1 ? 0.0 : algbw * 2.0 * (ranks - 1) / ranks;
}

double input_value(ReduceOp op, int rank, int ranks, std::size_t i) {
  const auto r = static_cast<std::size_t>(rank);
  const auto n = static_cast<std::size_t>(ranks);
  switch (op) {
    case ReduceOp::kSum: return static_cast<double>((r + 3 * i) % 11) - 5.0;
    case ReduceOp::kProduct:
      // One rank contributes 2, a third of the others -1: the product is ±2, exact in every type.
      if (i % n == r) return 2.0;
      return (i / n + r) % 3 == 0 ? -1.0 : 1.0;
    case ReduceOp::kMin:
    case ReduceOp::kMax: return static_cast<double>((r * 31 + i * 7) % 97) - 48.0;
  }
  return 0.0;
}

double expected_value(ReduceOp op, int ranks, std::size_t i) {
  double acc = input_value(op, 0, ranks, i);
  for (int r = 1; r < ranks; ++r) {
    const double v = input_value(op, r, ranks, i);
    switch (op) {
      case ReduceOp::kSum: acc += v; break;
      case ReduceOp::kProduct: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
    }
  }
  return acc;
}

void fill_input(void* out, std::size_t count, DataType type, ReduceOp op, int rank, int ranks) {
  with_host_type(type, [&](auto zero) {
    using T = decltype(zero);
    T* p = static_cast<T*>(out);
    for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<T>(input_value(op, rank, ranks, i));
  });
}

std::size_t count_wrong(const void* result, std::size_t count, DataType type, ReduceOp op, int ranks) {
  std::size_t wrong = 0;
  with_host_type(type, [&](auto zero) {
    using T = decltype(zero);
    const T* p = static_cast<const T*>(result);
    for (std::size_t i = 0; i < count; ++i)
      if (p[i] != static_cast<T>(expected_value(op, ranks, i))) ++wrong;
  });
  return wrong;
}

}  // namespace hvrun::bench
