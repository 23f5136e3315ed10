// The collectives, with N ranks as threads of this process over a real store on loopback: every
// operation × type × size class (0, 1, odd, large) against a reference computed here, in place and out
// of place; the rank contract; and errors that name what went wrong.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <functional>
#include <thread>

#include "common/error.hpp"
#include "collectives/bench_plan.hpp"
#include "collectives/loopback_ranks.hpp"
#include "hvrun/communicator.hpp"
#include "hvrun/collectives.h"
#include "collectives/rank_contract.hpp"
#include "collectives/store_client.hpp"
#include "tests/support/served_store.hpp"

using namespace hvrun;
using namespace std::chrono_literals;
using hvrun::test::ServedStore;

namespace {

CommunicatorOptions rank_options(const ServedStore& served, int rank, int size,
                                 std::chrono::milliseconds timeout = 20s) {
  return bench::loopback_rank_options(rank, size, served.client_options(timeout), timeout);
}

// Runs body(comm) on `size` threads, one Communicator each; rethrows the first rank's exception.
void run_ranks(const ServedStore& served, int size, const std::function<void(Communicator&)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        Communicator comm(rank_options(served, r, size));
        body(comm);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Rank r's element i: small integers, so every type holds them and every reduction is exact.
double input(ReduceOp op, int r, std::size_t i) {
  if (op == ReduceOp::kProduct) return (i + static_cast<std::size_t>(r)) % 3 == 0 ? -1.0 : ((i % 5 == 0) ? 2.0 : 1.0);
  return static_cast<double>((i * 7 + static_cast<std::size_t>(r) * 3) % 13) - 6.0;
}

double reference(ReduceOp op, int size, std::size_t i) {
  double acc = input(op, 0, i);
  for (int r = 1; r < size; ++r) {
    const double v = input(op, r, i);
    acc = op == ReduceOp::kSum       ? acc + v
          : op == ReduceOp::kProduct ? acc * v
          : op == ReduceOp::kMin     ? std::min(acc, v)
                                     : std::max(acc, v);
  }
  return acc;
}

template <typename T>
void check_allreduce(Communicator& comm, ReduceOp op, std::size_t count, bool in_place) {
  std::vector<T> send(count), recv(count, T(99));
  for (std::size_t i = 0; i < count; ++i) send[i] = static_cast<T>(input(op, comm.rank(), i));
  if (in_place) {
    comm.allreduce(send.data(), count, data_type_of<T>(), op);
    recv = send;
  } else {
    comm.allreduce(send.data(), recv.data(), count, data_type_of<T>(), op);
    for (std::size_t i = 0; i < count; ++i)  // the input is untouched
      if (send[i] != static_cast<T>(input(op, comm.rank(), i))) FAIL("out-of-place allreduce changed its input");
  }
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i)
    if (recv[i] != static_cast<T>(reference(op, comm.size(), i))) ++wrong;
  if (wrong != 0)
    FAIL("rank " << comm.rank() << ": allreduce " << data_type_name(data_type_of<T>()) << " " << reduce_op_name(op)
                 << " of " << count << (in_place ? " in place" : " out of place") << ": " << wrong << " wrong");
}

const std::vector<std::size_t> kSizes = {0, 1, 7, 1001, 1u << 20};

}  // namespace

TEST_CASE("allreduce: every operation, type and size class on 3 ranks", "[collectives]") {
  ServedStore served;
  std::atomic<int> checked{0};
  run_ranks(served, 3, [&](Communicator& comm) {
    CHECK(comm.size() == 3);
    CHECK(comm.iface() == "lo");
    int op_index = 0;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      ++op_index;
      for (std::size_t count : kSizes)
        for (bool in_place : {false, true}) {
          // The large size alternates in and out of place over the operations (and, within one, over the
          // types); the small sizes run both.
          if (count == kSizes.back() && in_place != (op_index % 2 == 0)) continue;
          check_allreduce<float>(comm, op, count, in_place);
          check_allreduce<double>(comm, op, count, !in_place);
          check_allreduce<std::int32_t>(comm, op, count, in_place);
          check_allreduce<std::int64_t>(comm, op, count, !in_place);
          checked++;
        }
    }
  });
  CHECK(checked == 3 * 4 * (2 * 4 + 1));
}

TEST_CASE("allreduce on 1 and 2 ranks, and the typed span form", "[collectives]") {
  for (int size : {1, 2}) {
    ServedStore served;  // one job per store: the ranks' communicator counts start together
    run_ranks(served, size, [&](Communicator& comm) {
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{999}}) {
        check_allreduce<float>(comm, ReduceOp::kSum, count, false);
        check_allreduce<std::int64_t>(comm, ReduceOp::kMax, count, true);
      }
      std::vector<double> v(5, comm.rank() + 1.0);
      comm.allreduce(std::span<double>(v), ReduceOp::kSum);
      CHECK(v == std::vector<double>(5, size == 1 ? 1.0 : 3.0));
    });
  }
}

TEST_CASE("broadcast from every root, allgather, barrier", "[collectives]") {
  ServedStore served;
  constexpr int kSize = 4;
  std::atomic<int> arrived{0};
  run_ranks(served, kSize, [&](Communicator& comm) {
    for (int root = 0; root < kSize; ++root)
      for (std::size_t count : kSizes) {
        std::vector<std::int32_t> buf(count);
        for (std::size_t i = 0; i < count; ++i)
          buf[i] = comm.rank() == root ? static_cast<std::int32_t>(i * 3 + static_cast<std::size_t>(root)) : -1;
        comm.broadcast(buf.data(), count, DataType::kInt32, root);
        for (std::size_t i = 0; i < count; ++i)
          if (buf[i] != static_cast<std::int32_t>(i * 3 + static_cast<std::size_t>(root)))
            FAIL("broadcast from " << root << " of " << count << ": element " << i << " is " << buf[i]);
      }
    std::vector<double> d(3, comm.rank() == 2 ? 0.5 : 0.0);
    comm.broadcast(std::span<double>(d), 2);
    CHECK(d == std::vector<double>(3, 0.5));

    for (std::size_t count : kSizes) {
      std::vector<float> mine(count);
      for (std::size_t i = 0; i < count; ++i) mine[i] = static_cast<float>(comm.rank() * 1000 + static_cast<int>(i % 1000));
      std::vector<float> all(count * kSize, -1.0f);
      comm.allgather(mine.data(), all.data(), count, DataType::kFloat32);
      for (int r = 0; r < kSize; ++r)
        for (std::size_t i = 0; i < count; ++i)
          if (all[static_cast<std::size_t>(r) * count + i] != static_cast<float>(r * 1000 + static_cast<int>(i % 1000)))
            FAIL("allgather of " << count << ": rank " << r << " element " << i);
      // In place: own part already at its offset.
      std::vector<std::int64_t> inplace(count * kSize, 0);
      for (std::size_t i = 0; i < count; ++i) inplace[static_cast<std::size_t>(comm.rank()) * count + i] = comm.rank() + 1;
      comm.allgather(inplace.data() + static_cast<std::size_t>(comm.rank()) * count, inplace.data(), count,
                     DataType::kInt64);
      for (std::size_t j = 0; j < inplace.size(); ++j)
        if (inplace[j] != static_cast<std::int64_t>(j / std::max<std::size_t>(count, 1)) + 1)
          FAIL("in-place allgather of " << count << ": element " << j);
    }

    for (int round = 1; round <= 3; ++round) {
      arrived++;
      comm.barrier();
      // Nobody passes the barrier before everyone reached it.
      CHECK(arrived.load() >= round * kSize);
      comm.barrier();
    }
  });
}

TEST_CASE("collective errors name the operation and the rank", "[collectives]") {
  ServedStore served;
  run_ranks(served, 2, [&](Communicator& comm) {
    std::vector<std::uint16_t> half(4);
    CHECK_THROWS_WITH(comm.allreduce(half.data(), half.size(), DataType::kFloat16, ReduceOp::kSum),
                      Catch::Contains("half is supported on GPU buffers (NCCL) only"));
    CHECK_THROWS_WITH(comm.broadcast(half.data(), 1, DataType::kInt32, 5),
                      Catch::Contains("from rank 5") && Catch::Contains("no such rank"));
    if (Communicator::nccl_built())
      CHECK_THROWS_WITH(comm.gpu_allreduce(nullptr, nullptr, 1, DataType::kFloat32, ReduceOp::kSum),
                        Catch::Contains("call init_gpu() first"));
    else
      CHECK_THROWS_WITH(comm.init_gpu(), Catch::Contains("has no NCCL"));
    CHECK_FALSE(comm.gpu_ready());
    // Still usable afterwards.
    check_allreduce<float>(comm, ReduceOp::kSum, 3, true);
  });
}

TEST_CASE("a peer that goes away is named in the error of the next collective", "[collectives]") {
  ServedStore served;
  std::string error;
  run_ranks(served, 2, [&](Communicator& comm) {
    comm.barrier();
    if (comm.rank() == 1) return;  // rank 1's communicator closes its connections now
    std::this_thread::sleep_for(200ms);
    std::vector<float> v(1000, 1.0f);
    try {
      comm.allreduce(v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    } catch (const CollectiveError& e) {
      error = e.what();
    }
  });
  INFO(error);
  CHECK_THAT(error, Catch::StartsWith("hvrun collectives: allreduce of 1000 float (sum) failed on rank 0 of 2 on "
                                      "localhost (lo): "));
  CHECK_THAT(error, Catch::Contains("127.0.0.1 is host localhost NIC lo (ranks 0-1)"));
}

TEST_CASE("a rendezvous that a rank misses times out naming the rank's key", "[collectives]") {
  ServedStore served;
  CommunicatorOptions lonely = rank_options(served, 0, 2, 500ms);
  lonely.store_prefix = "lonely/";
  try {
    Communicator comm(lonely);
    FAIL("the rendezvous of a 2-rank job with one rank succeeded");
  } catch (const CollectiveError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("rendezvous of rank 0 of 2 on localhost"));
    CHECK_THAT(what, Catch::Contains("timed out after 0.5 s waiting for keys: lonely/gloo/1"));
  }
}

TEST_CASE("communicators of one rank count their store prefixes alike", "[collectives]") {
  ServedStore served;
  run_ranks(served, 2, [&](Communicator& first) {
    // A second communicator on the same store: same ranks, fresh keys, both work.
    CommunicatorOptions o = rank_options(served, first.rank(), 2);
    Communicator second(o);
    check_allreduce<std::int32_t>(second, ReduceOp::kSum, 10, true);
    check_allreduce<std::int32_t>(first, ReduceOp::kMin, 10, false);
  });
}

TEST_CASE("the rank contract: values, and a clear error for each missing variable", "[collectives]") {
  std::map<std::string, std::string> env{
      {"HVRUN_RANK", "3"},          {"HVRUN_SIZE", "8"},
      {"HVRUN_LOCAL_RANK", "1"},    {"HVRUN_LOCAL_SIZE", "2"},
      {"HVRUN_IFACE", "enp6s0"},    {"HVRUN_ADDR", "10.0.0.2"},
      {"HVRUN_HOSTNAME", "b"},      {"HVRUN_STORE_ADDR", "10.0.0.1"},
      {"HVRUN_STORE_PORT", "4711"}, {"HVRUN_STORE_TOKEN", "secret"},
      {"HVRUN_COLLECTIVE_TIMEOUT", "42"},
  };
  auto lookup = [&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  const CommunicatorOptions o = options_from_rank_contract(lookup);
  CHECK(o.rank == 3);
  CHECK(o.size == 8);
  CHECK(o.local_rank == 1);
  CHECK(o.local_size == 2);
  CHECK(o.iface == "enp6s0");
  CHECK(o.address == "10.0.0.2");
  CHECK(o.hostname == "b");
  CHECK(o.store_host == "10.0.0.1");
  CHECK(o.store_port == 4711);
  CHECK(o.store_token == "secret");
  CHECK(o.timeout == 42s);

  SECTION("outside hvrun") {
    env.clear();
    CHECK_THROWS_WITH(options_from_rank_contract(lookup),
                      Catch::Equals("HVRUN_SIZE is not set: run this program under hvrun"));
    env["HVRUN_SIZE"] = "2";
    CHECK_THROWS_WITH(options_from_rank_contract(lookup),
                      Catch::Equals("HVRUN_RANK is not set: run this program under hvrun"));
  }
  SECTION("an hvrun that serves no store") {
    env.erase("HVRUN_STORE_TOKEN");
    CHECK_THROWS_WITH(options_from_rank_contract(lookup),
                      Catch::StartsWith("HVRUN_STORE_TOKEN is not set") && Catch::Contains("HVRUN_STORE_PORT"));
  }
  SECTION("malformed values") {
    env["HVRUN_RANK"] = "8";
    CHECK_THROWS_WITH(options_from_rank_contract(lookup), Catch::Contains("HVRUN_RANK='8'") &&
                                                              Catch::Contains("from 0 to 7"));
    env["HVRUN_RANK"] = "x";
    CHECK_THROWS_AS(options_from_rank_contract(lookup), UsageError);
    env["HVRUN_RANK"] = "3";
    env["HVRUN_STORE_PORT"] = "70000";
    CHECK_THROWS_WITH(options_from_rank_contract(lookup), Catch::Contains("HVRUN_STORE_PORT='70000'"));
  }
}

TEST_CASE("the C interface: a one-rank job from the environment, and errors as strings", "[collectives]") {
  ServedStore served;
  // This test owns the process's HVRUN_* variables for its duration and removes them after.
  const std::vector<std::pair<std::string, std::string>> vars = {
      {"HVRUN_RANK", "0"},           {"HVRUN_SIZE", "1"},         {"HVRUN_LOCAL_RANK", "0"},
      {"HVRUN_LOCAL_SIZE", "1"},     {"HVRUN_IFACE", "lo"},       {"HVRUN_ADDR", "127.0.0.1"},
      {"HVRUN_STORE_ADDR", "127.0.0.1"}, {"HVRUN_STORE_PORT", std::to_string(served.port())},
      {"HVRUN_STORE_TOKEN", served.token()}};
  for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  hvrun_comm* comm = nullptr;
  const int rc = hvrun_init(&comm);
  for (const auto& [k, v] : vars) ::unsetenv(k.c_str());
  REQUIRE(rc == 0);
  REQUIRE(comm != nullptr);
  CHECK(hvrun_rank(comm) == 0);
  CHECK(hvrun_size(comm) == 1);
  CHECK(std::string(hvrun_iface(comm)) == "lo");
  float v[3] = {1, 2, 3}, out[3] = {};
  CHECK(hvrun_allreduce(comm, v, out, 3, HVRUN_FLOAT32, HVRUN_MAX) == 0);
  CHECK(out[2] == 3.0f);
  CHECK(hvrun_barrier(comm) == 0);
  CHECK(hvrun_allreduce(comm, v, v, 3, HVRUN_BFLOAT16, HVRUN_SUM) == HVRUN_ERROR_USAGE);
  CHECK_THAT(hvrun_error_string(), Catch::Contains("bfloat16"));
  CHECK(hvrun_allreduce(comm, v, v, 3, static_cast<hvrun_dtype>(77), HVRUN_SUM) == HVRUN_ERROR_USAGE);
  CHECK_THAT(hvrun_error_string(), Catch::Contains("unknown hvrun_dtype 77"));
  CHECK(hvrun_finalize(comm) == 0);

  CHECK(hvrun_barrier(nullptr) == HVRUN_ERROR_USAGE);
  CHECK_THAT(hvrun_error_string(), Catch::Contains("NULL"));
  hvrun_comm* none = reinterpret_cast<hvrun_comm*>(1);
  CHECK(hvrun_init(&none) == HVRUN_ERROR_USAGE);  // the variables are gone again
  CHECK(none == nullptr);
  CHECK_THAT(hvrun_error_string(), Catch::Contains("is not set: run this program under hvrun"));
}

TEST_CASE("the C interface: each kind of failure has its own result code", "[collectives]") {
  ServedStore served;
  // Rank 0 of a 2-rank job whose rank 1 never comes: the rendezvous fails (HVRUN_ERROR_COLLECTIVE,
  // saying it timed out), not a usage error and not a flat -1.
  const std::vector<std::pair<std::string, std::string>> vars = {
      {"HVRUN_RANK", "0"},           {"HVRUN_SIZE", "2"},         {"HVRUN_LOCAL_RANK", "0"},
      {"HVRUN_LOCAL_SIZE", "2"},     {"HVRUN_IFACE", "lo"},       {"HVRUN_ADDR", "127.0.0.1"},
      {"HVRUN_STORE_ADDR", "127.0.0.1"}, {"HVRUN_STORE_PORT", std::to_string(served.port())},
      {"HVRUN_STORE_TOKEN", served.token()}, {"HVRUN_COLLECTIVE_TIMEOUT", "1"}};
  for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  hvrun_comm* comm = nullptr;
  const int rc = hvrun_init(&comm);
  const std::string why = hvrun_error_string();
  ::setenv("HVRUN_STORE_TOKEN", "not-the-token", 1);
  hvrun_comm* refused = nullptr;
  const int rc_token = hvrun_init(&refused);
  const std::string why_token = hvrun_error_string();
  for (const auto& [k, v] : vars) ::unsetenv(k.c_str());
  CHECK(rc == HVRUN_ERROR_COLLECTIVE);
  CHECK(comm == nullptr);
  CHECK_THAT(why, Catch::Contains("timed out"));
  // A store that refuses the token: the rendezvous failed, not a bug of hvrun's (HVRUN_ERROR_INTERNAL).
  CHECK(rc_token == HVRUN_ERROR_COLLECTIVE);
  CHECK(refused == nullptr);
  CHECK_THAT(why_token, Catch::Contains("wrong store token"));
}

TEST_CASE("benchmark plan: sizes, sweeps, bus bandwidth, exact known answers", "[collectives]") {
  using namespace hvrun::bench;
  CHECK(parse_byte_size("8") == 8);
  CHECK(parse_byte_size("512K") == 512 * 1024);
  CHECK(parse_byte_size("64M") == 64u << 20);
  CHECK(parse_byte_size("1G") == 1u << 30);
  CHECK(parse_byte_size("2kb") == 2048);
  CHECK(parse_byte_size("3MiB") == 3u << 20);
  CHECK_THROWS_WITH(parse_byte_size("12Q"), Catch::Contains("unknown unit"));
  CHECK_THROWS_WITH(parse_byte_size("M"), Catch::Contains("not a byte size"));
  CHECK(sweep(8, 64u << 20, 4).size() == 12);
  CHECK(sweep(8, 64u << 20, 4).back() == 32u << 20);
  CHECK(sweep(1024, 1024, 2) == std::vector<std::uint64_t>{1024});
  CHECK_THROWS_AS(sweep(16, 8, 2), UsageError);
  CHECK_THROWS_AS(sweep(8, 16, 1), UsageError);
  CHECK(bus_bandwidth(1.0, 4) == Approx(1.5));
  CHECK(bus_bandwidth(1.0, 1) == 0.0);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct})
    for (int ranks : {1, 2, 5, 64})
      for (std::size_t i = 0; i < 200; ++i) {
        const double e = expected_value(op, ranks, i);
        CHECK(e == std::floor(e));
        CHECK(std::abs(e) <= 5.0 * ranks + 48);
        // Exact in float and int32 alike.
        CHECK(static_cast<double>(static_cast<float>(e)) == e);
      }
  std::vector<std::int32_t> buf(100);
  fill_input(buf.data(), buf.size(), DataType::kInt32, ReduceOp::kSum, 0, 1);
  CHECK(count_wrong(buf.data(), buf.size(), DataType::kInt32, ReduceOp::kSum, 1) == 0);
  buf[17] += 1;
  CHECK(count_wrong(buf.data(), buf.size(), DataType::kInt32, ReduceOp::kSum, 1) == 1);
}
