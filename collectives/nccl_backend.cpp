#include "collectives/nccl_backend.hpp"

#include <thread>

#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "collectives/collectives_log.hpp"
#include "collectives/nccl_check.hpp"
#include "collectives/store_client.hpp"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "hvrun needs NCCL 2.14 or newer (non-blocking communicators, ncclGetLastError)"
#endif

namespace hvrun {

namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(DataType type) {
  switch (type) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
  }
  throw CollectiveError("unknown data type");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kProduct: return ncclProd;
  }
  throw CollectiveError("unknown reduction");
}

// Polling pauses while NCCL or CUDA works: short at first (small collectives finish in microseconds),
// then at most a millisecond, so a long wait costs little CPU.
class Backoff {
 public:
  void pause() {
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, std::chrono::microseconds(1000));
  }

 private:
  std::chrono::microseconds pause_{20};
};

}  // namespace

std::string exchange_nccl_unique_id(StoreClient& store, const std::string& key, int rank,
                                    std::chrono::milliseconds timeout) {
  if (rank == 0) {
    ncclUniqueId id;
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr, "rank 0");
    std::string bytes(id.internal, sizeof id.internal);
    store.set(key, bytes);
    return bytes;
  }
  std::string bytes = store.get(key, timeout);
  if (bytes.size() != sizeof(ncclUniqueId::internal))
    throw CollectiveError("rank " + std::to_string(rank) + ": NCCL unique id at '" + key + "' has " +
                          std::to_string(bytes.size()) + " bytes, expected " +
                          std::to_string(sizeof(ncclUniqueId::internal)));
  return bytes;
}

struct NcclBackend::Impl {
  std::string where;
  std::chrono::milliseconds timeout;
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t own_stream = nullptr;
  std::string aborted_because;  // set once the communicator was aborted; every later call fails with it

  void ensure_usable(const char* what) const {
    if (!aborted_because.empty())
      throw CollectiveError(where + ": " + what + ": the NCCL communicator was aborted earlier (" + aborted_because +
                            ")");
  }

  void abort(const std::string& why) {
    if (comm == nullptr) return;
    aborted_because = why;
    const ncclResult_t r = ncclCommAbort(comm);
    if (r != ncclSuccess) collectives_log().warn("{}: ncclCommAbort: {}", where, ncclGetErrorString(r));
    comm = nullptr;
  }

  // A non-blocking communicator's call may return ncclInProgress: wait, within the timeout, until NCCL
  // says it is done, and abort the communicator when it fails or takes too long.
  void complete(ncclResult_t result, const char* call) {
    try {
      if (check_nccl(result, call, comm, where) == ncclSuccess) return;
      const auto deadline = Clock::now() + timeout;
      Backoff backoff;
      for (;;) {
        ncclResult_t state = ncclSuccess;
        check_nccl(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError", comm, where);
        if (state == ncclSuccess) return;
        check_nccl(state, call, comm, where);
        if (Clock::now() >= deadline)
          throw TimeoutError(where + ": " + call + " did not complete within " + seconds_text(timeout) +
                             " (a rank missing, or a network path that drops packets)");
        backoff.pause();
      }
    } catch (const Error& e) {
      abort(e.what());
      throw;
    }
  }

  cudaStream_t stream_of(void* stream) const { return stream ? static_cast<cudaStream_t>(stream) : own_stream; }
};

NcclBackend::NcclBackend(int rank, int size, int local_rank, int device, StoreClient& store, const std::string& key,
                         std::chrono::milliseconds timeout, std::string where)
    : impl_(std::make_unique<Impl>()) {
  impl_->where = std::move(where);
  impl_->timeout = timeout;
  // Exchange the id first: rank 0 needs no GPU for it, and a rank without one must not leave the
  // others waiting for an id that never comes.
  std::string id_bytes = exchange_nccl_unique_id(store, key, rank, timeout);
  ncclUniqueId id;
  std::copy(id_bytes.begin(), id_bytes.end(), id.internal);

  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount (NCCL needs a CUDA device)", impl_->where);
  if (count == 0) throw CollectiveError(impl_->where + ": no CUDA device, so NCCL cannot run here");
  impl_->device = device >= 0 ? device : local_rank % count;
  if (impl_->device >= count)
    throw CollectiveError(impl_->where + ": CUDA device " + std::to_string(impl_->device) + " does not exist (" +
                          std::to_string(count) + " devices)");
  check_cuda(cudaSetDevice(impl_->device), "cudaSetDevice", impl_->where);

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so that a missing rank costs the timeout, not forever
  impl_->complete(ncclCommInitRankConfig(&impl_->comm, size, id, rank, &config), "ncclCommInitRank");
  check_cuda(cudaStreamCreateWithFlags(&impl_->own_stream, cudaStreamNonBlocking), "cudaStreamCreate", impl_->where);
  collectives_log().debug("{}: NCCL communicator ready on CUDA device {}", impl_->where, impl_->device);
}

NcclBackend::~NcclBackend() {
  if (impl_->comm != nullptr) {
    // Flush what was issued, then destroy; a communicator that cannot finish in time is aborted.
    try {
      impl_->complete(ncclCommFinalize(impl_->comm), "ncclCommFinalize");
      if (impl_->comm != nullptr) ncclCommDestroy(impl_->comm);
    } catch (const Error& e) {
      collectives_log().warn("{}", e.what());
    }
    impl_->comm = nullptr;
  }
  if (impl_->own_stream != nullptr) cudaStreamDestroy(impl_->own_stream);
}

int NcclBackend::device() const { return impl_->device; }

void NcclBackend::allreduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
                            void* stream) {
  impl_->ensure_usable("allreduce");
  check_cuda(cudaSetDevice(impl_->device), "cudaSetDevice", impl_->where);
  impl_->complete(
      ncclAllReduce(send, recv, count, nccl_type(type), nccl_op(op), impl_->comm, impl_->stream_of(stream)),
      "ncclAllReduce");
}

void NcclBackend::broadcast(void* buffer, std::size_t count, DataType type, int root, void* stream) {
  impl_->ensure_usable("broadcast");
  check_cuda(cudaSetDevice(impl_->device), "cudaSetDevice", impl_->where);
  impl_->complete(ncclBroadcast(buffer, buffer, count, nccl_type(type), root, impl_->comm, impl_->stream_of(stream)),
                  "ncclBroadcast");
}

void NcclBackend::allgather(const void* send, void* recv, std::size_t count, DataType type, void* stream) {
  impl_->ensure_usable("allgather");
  check_cuda(cudaSetDevice(impl_->device), "cudaSetDevice", impl_->where);
  impl_->complete(ncclAllGather(send, recv, count, nccl_type(type), impl_->comm, impl_->stream_of(stream)),
                  "ncclAllGather");
}

void NcclBackend::synchronize(void* stream) {
  impl_->ensure_usable("synchronize");
  const cudaStream_t s = impl_->stream_of(stream);
  const auto deadline = Clock::now() + impl_->timeout;
  Backoff backoff;
  for (;;) {
    const cudaError_t state = cudaStreamQuery(s);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) {
      const std::string why = impl_->where + ": cudaStreamQuery failed: " + cudaGetErrorString(state);
      impl_->abort(why);
      throw CollectiveError(why);
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(impl_->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      try {
        check_nccl(async, "NCCL (asynchronous error)", impl_->comm, impl_->where);
      } catch (const Error& e) {
        impl_->abort(e.what());
        throw;
      }
    }
    if (Clock::now() >= deadline) {
      const std::string why = impl_->where + ": GPU collectives did not finish within " + seconds_text(impl_->timeout) +
                              " (a rank missing, or a network path that drops packets)";
      impl_->abort(why);
      throw TimeoutError(why);
    }
    backoff.pause();
  }
}

}  // namespace hvrun
