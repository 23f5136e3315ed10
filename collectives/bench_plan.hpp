#pragma once
// What hvrun-allreduce-bench runs and checks, apart from running it: byte sizes as nccl-tests takes
// them, the sizes of a sweep, bus bandwidth, and inputs whose reductions are exact in every type (small
// integers), so every result can be compared for equality with a known answer.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "hvrun/data_type.hpp"

namespace hvrun::bench {

// "8", "512K", "64M", "1G" (powers of 1024; a trailing "B" or "iB" is allowed). Throws UsageError.
std::uint64_t parse_byte_size(std::string_view text);

// min, min*factor, ... up to max inclusive (at least {min}). Throws UsageError when factor < 2 or
// min > max or min is 0.
std::vector<std::uint64_t> sweep(std::uint64_t min_bytes, std::uint64_t max_bytes, std::uint64_t factor);

// nccl-tests' bus bandwidth of an allreduce: algbw × 2(n−1)/n.
double bus_bandwidth(double algbw, int ranks);

// Rank `rank`'s element i, and the reduction of element i over `ranks` ranks: small integers, so exact
// as float, double, int32 and int64 alike (|sum| ≤ 5·ranks, |product| ≤ 2).
double input_value(ReduceOp op, int rank, int ranks, std::size_t i);
double expected_value(ReduceOp op, int ranks, std::size_t i);

// Fills `count` elements of `type` at `out` with input_value(op, rank, ranks, i).
void fill_input(void* out, std::size_t count, DataType type, ReduceOp op, int rank, int ranks);
// How many of `count` elements at `result` differ from expected_value.
std::size_t count_wrong(const void* result, std::size_t count, DataType type, ReduceOp op, int ranks);

}  // namespace hvrun::bench
