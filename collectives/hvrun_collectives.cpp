// The C interface (hvrun/collectives.h) over Communicator: exceptions become an hvrun_result code by
// their kind and a thread-local message, because no exception may cross into C.
#include "hvrun/collectives.h"

#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "hvrun/communicator.hpp"

struct hvrun_comm {
  hvrun::Communicator comm;
};

namespace {

thread_local std::string last_error;

int failed(hvrun_result code, std::string message) {
  last_error = std::move(message);
  return code;
}

template <typename F>
int guarded(F&& f) noexcept {
  try {
    f();
    last_error.clear();
    return HVRUN_SUCCESS;
  } catch (const std::bad_alloc&) {
    return failed(HVRUN_ERROR_SYSTEM, "hvrun collectives: out of memory");
  } catch (const hvrun::UsageError& e) {
    return failed(HVRUN_ERROR_USAGE, e.what());
  } catch (const std::invalid_argument& e) {
    return failed(HVRUN_ERROR_USAGE, e.what());
  } catch (const hvrun::TimeoutError& e) {
    return failed(HVRUN_ERROR_TIMEOUT, e.what());
  } catch (const hvrun::CollectiveError& e) {
    return failed(HVRUN_ERROR_COLLECTIVE, e.what());
  } catch (const hvrun::ProtocolError& e) {
    return failed(HVRUN_ERROR_COLLECTIVE, e.what());
  } catch (const hvrun::SystemError& e) {
    return failed(HVRUN_ERROR_SYSTEM, e.what());
  } catch (const hvrun::Error& e) {
    // Any other of hvrun's own errors comes from the job's store or the rendezvous (a refused token).
    return failed(HVRUN_ERROR_COLLECTIVE, e.what());
  } catch (const std::exception& e) {
    return failed(HVRUN_ERROR_INTERNAL, e.what());
  } catch (...) {
    return failed(HVRUN_ERROR_INTERNAL, "hvrun collectives: unknown error");
  }
}

int no_comm() {
  return failed(HVRUN_ERROR_USAGE, "hvrun collectives: the communicator is NULL (did hvrun_init fail?)");
}

hvrun::DataType to_type(hvrun_dtype t) {
  switch (t) {
    case HVRUN_FLOAT32: return hvrun::DataType::kFloat32;
    case HVRUN_FLOAT64: return hvrun::DataType::kFloat64;
    case HVRUN_INT32: return hvrun::DataType::kInt32;
    case HVRUN_INT64: return hvrun::DataType::kInt64;
    case HVRUN_FLOAT16: return hvrun::DataType::kFloat16;
    case HVRUN_BFLOAT16: return hvrun::DataType::kBFloat16;
    case HVRUN_DTYPE_MAX_ENUM: break;
  }
  throw std::invalid_argument("hvrun collectives: unknown hvrun_dtype " + std::to_string(static_cast<int>(t)));
}

hvrun::ReduceOp to_op(hvrun_op op) {
  switch (op) {
    case HVRUN_SUM: return hvrun::ReduceOp::kSum;
    case HVRUN_MIN: return hvrun::ReduceOp::kMin;
    case HVRUN_MAX: return hvrun::ReduceOp::kMax;
    case HVRUN_PROD: return hvrun::ReduceOp::kProduct;
    case HVRUN_OP_MAX_ENUM: break;
  }
  throw std::invalid_argument("hvrun collectives: unknown hvrun_op " + std::to_string(static_cast<int>(op)));
}

}  // namespace

extern "C" {

int hvrun_init(hvrun_comm** comm) {
  if (comm == nullptr) return no_comm();
  *comm = nullptr;
  return guarded([&] { *comm = new hvrun_comm{hvrun::Communicator::init()}; });
}

int hvrun_finalize(hvrun_comm* comm) {
  if (comm == nullptr) return HVRUN_SUCCESS;
  // Collective, like MPI_Finalize: no rank tears its connections down while others still use them.
  // The communicator is freed even when the barrier fails (a rank died).
  std::unique_ptr<hvrun_comm> owned(comm);
  return guarded([&] { owned->comm.barrier(); });
}

int hvrun_rank(const hvrun_comm* comm) { return comm ? comm->comm.rank() : -1; }
int hvrun_size(const hvrun_comm* comm) { return comm ? comm->comm.size() : -1; }
int hvrun_local_rank(const hvrun_comm* comm) { return comm ? comm->comm.local_rank() : -1; }
const char* hvrun_iface(const hvrun_comm* comm) { return comm ? comm->comm.iface().c_str() : ""; }

int hvrun_allreduce(hvrun_comm* comm, const void* send, void* recv, size_t count, hvrun_dtype type, hvrun_op op) {
  if (!comm) return no_comm();
  return guarded([&] { comm->comm.allreduce(send, recv, count, to_type(type), to_op(op)); });
}

int hvrun_broadcast(hvrun_comm* comm, void* buffer, size_t count, hvrun_dtype type, int root) {
  if (!comm) return no_comm();
  return guarded([&] { comm->comm.broadcast(buffer, count, to_type(type), root); });
}

int hvrun_allgather(hvrun_comm* comm, const void* send, void* recv, size_t count, hvrun_dtype type) {
  if (!comm) return no_comm();
  return guarded([&] { comm->comm.allgather(send, recv, count, to_type(type)); });
}

int hvrun_barrier(hvrun_comm* comm) {
  if (!comm) return no_comm();
  return guarded([&] { comm->comm.barrier(); });
}

int hvrun_gpu_init(hvrun_comm* comm, int device) {
  if (!comm) return no_comm();
  return guarded([&] { comm->comm.init_gpu(device); });
}

int hvrun_gpu_allreduce(hvrun_comm* comm, const void* send, void* recv, size_t count, hvrun_dtype type,
                        hvrun_op op, void* stream) {
  if (!comm) return no_comm();
  return guarded([&] { comm->comm.gpu_allreduce(send, recv, count, to_type(type), to_op(op), stream); });
}

int hvrun_gpu_broadcast(hvrun_comm* comm, void* buffer, size_t count, hvrun_dtype type, int root, void* stream) {
  if (!comm) return no_comm();
  return guarded([&] { comm->comm.gpu_broadcast(buffer, count, to_type(type), root, stream); });
}

int hvrun_gpu_allgather(hvrun_comm* comm, const void* send, void* recv, size_t count, hvrun_dtype type,
                        void* stream) {
  if (!comm) return no_comm();
  return guarded([&] { comm->comm.gpu_allgather(send, recv, count, to_type(type), stream); });
}

int hvrun_gpu_synchronize(hvrun_comm* comm, void* stream) {
  if (!comm) return no_comm();
  return guarded([&] { comm->comm.gpu_synchronize(stream); });
}

const char* hvrun_error_string(void) { return last_error.c_str(); }

}  // extern "C"
