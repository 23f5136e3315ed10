// The NCCL path. Without a GPU (CI, this machine): the unique id is made by rank 0, travels through the
// store and is identical on every rank; NCCL's failure to start becomes a clear error. With GPUs
// ([gpu], one rank per GPU): allreduce, broadcast and allgather on device buffers, half and bfloat16
// included. [gpu] tests skip with a warning saying why when there is nothing to run on.
#include <catch2/catch.hpp>

#include <exception>
#include <functional>
#include <thread>

#include "common/error.hpp"
#include "hvrun/communicator.hpp"
#include "collectives/loopback_ranks.hpp"
#include "collectives/store_client.hpp"
#include "tests/support/served_store.hpp"

#if HVRUN_HAVE_NCCL
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "collectives/nccl_backend.hpp"
#include "collectives/nccl_check.hpp"
#endif

using namespace hvrun;
using namespace std::chrono_literals;
using hvrun::test::ServedStore;

namespace {

// Runs body(rank) on `size` threads; rethrows the first rank's exception.
[[maybe_unused]] void run_threads(int size, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

[[maybe_unused]] CommunicatorOptions rank_options(const ServedStore& served, int rank, int size) {
  return hvrun::bench::loopback_rank_options(rank, size, served.client_options(20s), 20s);
}

#if HVRUN_HAVE_NCCL
// How many CUDA devices there are, or why none can be used.
int cuda_devices(std::string& why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    why = std::string("no usable CUDA device: ") + cudaGetErrorString(e);
    return 0;
  }
  if (count == 0) why = "no CUDA device";
  return count;
}
#endif

}  // namespace

#if HVRUN_HAVE_NCCL

TEST_CASE("NCCL unique id: made by rank 0, exchanged through the store, identical everywhere", "[nccl]") {
  ServedStore served;
  constexpr int kRanks = 4;
  std::vector<std::string> ids(kRanks);
  run_threads(kRanks, [&](int r) {
    StoreClient store(served.client_options());
    ids[static_cast<std::size_t>(r)] = exchange_nccl_unique_id(store, "job/nccl/unique_id", r, 20s);
  });
  REQUIRE(ids[0].size() == sizeof(ncclUniqueId::internal));
  CHECK(ids[0] != std::string(ids[0].size(), '\0'));
  for (const auto& id : ids) CHECK(id == ids[0]);

  // A rank whose rank 0 never comes times out naming the key.
  StoreClient store(served.client_options());
  CHECK_THROWS_WITH(exchange_nccl_unique_id(store, "other/nccl/unique_id", 1, 200ms),
                    Catch::Contains("waiting for keys: other/nccl/unique_id"));
}

TEST_CASE("NCCL: ncclCommInitRank's failure without a GPU becomes a clear error", "[nccl]") {
  std::string why;
  if (cuda_devices(why) > 0) {
    WARN("skipped: this machine has a CUDA device, so NCCL's init does not fail here");
    return;
  }
  ServedStore served;
  std::vector<std::string> errors(2);
  run_threads(2, [&](int r) {
    StoreClient store(served.client_options());
    const std::string bytes = exchange_nccl_unique_id(store, "fail/nccl/unique_id", r, 20s);
    ncclUniqueId id;
    std::copy(bytes.begin(), bytes.end(), id.internal);
    ncclComm_t comm = nullptr;
    try {
      check_nccl(ncclCommInitRank(&comm, 2, id, r), "ncclCommInitRank", comm, "rank " + std::to_string(r));
    } catch (const CollectiveError& e) {
      errors[static_cast<std::size_t>(r)] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    INFO(errors[static_cast<std::size_t>(r)]);
    CHECK_THAT(errors[static_cast<std::size_t>(r)],
               Catch::StartsWith("rank " + std::to_string(r) + ": ncclCommInitRank failed: ") &&
                   Catch::Contains("cuda") && Catch::Contains("(") /* ncclGetLastError's detail */);
  }

  // Through the Communicator: the id exchange still happens, then the missing device is named.
  ServedStore served2;
  std::vector<std::string> comm_errors(2);
  run_threads(2, [&](int r) {
    Communicator comm(rank_options(served2, r, 2));
    try {
      comm.init_gpu();
    } catch (const CollectiveError& e) {
      comm_errors[static_cast<std::size_t>(r)] = e.what();
    }
    CHECK_FALSE(comm.gpu_ready());
    CHECK_THROWS_WITH(comm.gpu_synchronize(), Catch::Contains("init_gpu"));
  });
  for (int r = 0; r < 2; ++r)
    CHECK_THAT(comm_errors[static_cast<std::size_t>(r)],
               Catch::Contains("rank " + std::to_string(r) + " of 2") && Catch::Contains("cudaGetDeviceCount"));
}

TEST_CASE("NCCL allreduce, broadcast, allgather on device buffers, one rank per GPU", "[gpu]") {
  std::string why;
  const int devices = cuda_devices(why);
  if (devices == 0) {
    WARN("skipped: " << why);
    return;
  }
  const int ranks = std::min(devices, 8);
  ServedStore served;
  constexpr std::size_t kCount = (1u << 20) + 1;  // large and odd
  run_threads(ranks, [&](int r) {
    Communicator comm(rank_options(served, r, ranks));
    comm.init_gpu(r);
    REQUIRE(comm.gpu_ready());
    CHECK(comm.gpu_device() == r);
    auto cuda = [](cudaError_t e) { REQUIRE(e == cudaSuccess); };
    cuda(cudaSetDevice(r));

    // float sum, out of place then in place; int64 max.
    std::vector<float> host(kCount);
    for (std::size_t i = 0; i < kCount; ++i) host[i] = static_cast<float>((i + static_cast<std::size_t>(r)) % 7);
    float *send = nullptr, *recv = nullptr;
    cuda(cudaMalloc(&send, kCount * sizeof(float)));
    cuda(cudaMalloc(&recv, kCount * sizeof(float)));
    cuda(cudaMemcpy(send, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice));
    comm.gpu_allreduce(send, recv, kCount, DataType::kFloat32, ReduceOp::kSum);
    comm.gpu_allreduce(send, send, kCount, DataType::kFloat32, ReduceOp::kSum);
    comm.gpu_synchronize();
    std::vector<float> out(kCount), out2(kCount);
    cuda(cudaMemcpy(out.data(), recv, kCount * sizeof(float), cudaMemcpyDeviceToHost));
    cuda(cudaMemcpy(out2.data(), send, kCount * sizeof(float), cudaMemcpyDeviceToHost));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kCount; ++i) {
      float expect = 0;
      for (int q = 0; q < ranks; ++q) expect += static_cast<float>((i + static_cast<std::size_t>(q)) % 7);
      if (out[i] != expect || out2[i] != expect) ++wrong;
    }
    CHECK(wrong == 0);

    // half and bfloat16: small integers, exact in both.
    constexpr std::size_t kSmall = 1001;
    std::vector<__half> h(kSmall);
    std::vector<__nv_bfloat16> b(kSmall);
    for (std::size_t i = 0; i < kSmall; ++i) {
      h[i] = __float2half(static_cast<float>(i % 5));
      b[i] = __float2bfloat16(static_cast<float>(i % 3));
    }
    void *dh = nullptr, *db = nullptr;
    cuda(cudaMalloc(&dh, kSmall * sizeof(__half)));
    cuda(cudaMalloc(&db, kSmall * sizeof(__nv_bfloat16)));
    cuda(cudaMemcpy(dh, h.data(), kSmall * sizeof(__half), cudaMemcpyHostToDevice));
    cuda(cudaMemcpy(db, b.data(), kSmall * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
    comm.gpu_allreduce(dh, dh, kSmall, DataType::kFloat16, ReduceOp::kSum);
    comm.gpu_allreduce(db, db, kSmall, DataType::kBFloat16, ReduceOp::kMax);
    comm.gpu_synchronize();
    cuda(cudaMemcpy(h.data(), dh, kSmall * sizeof(__half), cudaMemcpyDeviceToHost));
    cuda(cudaMemcpy(b.data(), db, kSmall * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
    wrong = 0;
    for (std::size_t i = 0; i < kSmall; ++i) {
      if (__half2float(h[i]) != static_cast<float>(ranks * static_cast<int>(i % 5))) ++wrong;
      if (__bfloat162float(b[i]) != static_cast<float>(i % 3)) ++wrong;
    }
    CHECK(wrong == 0);

    // broadcast from the last rank; allgather of each rank's id, on a stream of the caller's.
    cudaStream_t stream = nullptr;
    cuda(cudaStreamCreate(&stream));
    std::vector<std::int32_t> bc(kSmall, r == ranks - 1 ? 77 : -1);
    std::int32_t *dbc = nullptr, *dall = nullptr, *dmine = nullptr;
    cuda(cudaMalloc(&dbc, kSmall * sizeof(std::int32_t)));
    cuda(cudaMalloc(&dall, static_cast<std::size_t>(ranks) * sizeof(std::int32_t)));
    cuda(cudaMalloc(&dmine, sizeof(std::int32_t)));
    cuda(cudaMemcpy(dbc, bc.data(), kSmall * sizeof(std::int32_t), cudaMemcpyHostToDevice));
    const std::int32_t mine = 100 + r;
    cuda(cudaMemcpy(dmine, &mine, sizeof mine, cudaMemcpyHostToDevice));
    comm.gpu_broadcast(dbc, kSmall, DataType::kInt32, ranks - 1, stream);
    comm.gpu_allgather(dmine, dall, 1, DataType::kInt32, stream);
    comm.gpu_synchronize(stream);
    cuda(cudaMemcpy(bc.data(), dbc, kSmall * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
    std::vector<std::int32_t> all(static_cast<std::size_t>(ranks));
    cuda(cudaMemcpy(all.data(), dall, all.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
    CHECK(bc == std::vector<std::int32_t>(kSmall, 77));
    for (int q = 0; q < ranks; ++q) CHECK(all[static_cast<std::size_t>(q)] == 100 + q);

    for (void* p : {static_cast<void*>(send), static_cast<void*>(recv), dh, db, static_cast<void*>(dbc),
                    static_cast<void*>(dall), static_cast<void*>(dmine)})
      cudaFree(p);
    cudaStreamDestroy(stream);
  });
}

#else

TEST_CASE("NCCL allreduce, broadcast, allgather on device buffers, one rank per GPU", "[gpu]") {
  WARN("skipped: this build has no NCCL (HVRUN_WITH_NCCL=OFF or NCCL not found)");
  CHECK_FALSE(Communicator::nccl_built());
}

#endif
