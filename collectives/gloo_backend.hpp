#pragma once
// Private: the CPU path of a Communicator. A Gloo TCP device bound to the chosen NIC, a context whose
// full mesh is connected through the job's store, and Gloo's own algorithms (ring allreduce, broadcast,
// allgather, barrier). Gloo's headers stay in the .cpp.
#include <cstddef>
#include <memory>
#include <string>

#include "hvrun/communicator.hpp"
#include "hvrun/data_type.hpp"

namespace hvrun {

class StoreClient;

class GlooBackend {
 public:
  // Creates the device and connects to every other rank; keys under `prefix` in the store.
  GlooBackend(const CommunicatorOptions& options, StoreClient& store, const std::string& prefix);
  ~GlooBackend();
  GlooBackend(const GlooBackend&) = delete;
  GlooBackend& operator=(const GlooBackend&) = delete;

  const std::string& iface() const;
  const std::string& description() const;

  // send == recv is in place. Gloo reads `send` only.
  void allreduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  void broadcast(void* buffer, std::size_t count, DataType type, int root);
  void allgather(const void* send, void* recv, std::size_t count, DataType type);
  void barrier();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun
