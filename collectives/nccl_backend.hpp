#pragma once
// Private: the GPU path of a Communicator (compiled only with NCCL). One NCCL communicator per
// Communicator, made from a unique id that rank 0 creates and hands out through the store; collectives
// on the caller's CUDA stream or on one of ours. NCCL and CUDA headers stay in the .cpp files.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "hvrun/data_type.hpp"

namespace hvrun {

class StoreClient;

// Rank 0 calls ncclGetUniqueId (NCCL binds it per NCCL_SOCKET_IFNAME) and sets it at `key`; every
// other rank gets it from there (blocking up to `timeout`). Returns the id's raw bytes, identical on
// every rank. Throws CollectiveError for an NCCL failure, TimeoutError naming the key.
std::string exchange_nccl_unique_id(StoreClient& store, const std::string& key, int rank,
                                    std::chrono::milliseconds timeout);

class NcclBackend {
 public:
  // `device` -1: local_rank modulo the number of CUDA devices. `where` names this rank in messages.
  // Collective: every rank constructs one at the same point.
  NcclBackend(int rank, int size, int local_rank, int device, StoreClient& store, const std::string& key,
              std::chrono::milliseconds timeout, std::string where);
  ~NcclBackend();
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  int device() const;
  void allreduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op, void* stream);
  void broadcast(void* buffer, std::size_t count, DataType type, int root, void* stream);
  void allgather(const void* send, void* recv, std::size_t count, DataType type, void* stream);
  void synchronize(void* stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun
