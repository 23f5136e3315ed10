#pragma once
// The collectives a training program links (libhvrun_collectives; CMake: find_package(hvrun CONFIG) and
// hvrun::collectives; pkg-config: hvrun-collectives): rendezvous through the
// job's store, then allreduce, broadcast, allgather and barrier among the job's ranks. Host (CPU)
// buffers go through Gloo's TCP transport bound to the NIC hvrun chose; CUDA buffers through NCCL when
// the library was built with it (Communicator::nccl_built()).
//
//   auto comm = hvrun::Communicator::init();          // from the environment hvrun gives each rank
//   comm.allreduce(grads.data(), grads.size(), hvrun::DataType::kFloat32, hvrun::ReduceOp::kSum);
//
// Every call is collective: all ranks make the same calls in the same order with the same count, type,
// operation and root. Every call has a deadline (CommunicatorOptions::timeout); a failure throws
// CollectiveError (hvrun/error.hpp) naming the operation, this rank and, where known, the peer;
// TimeoutError when the deadline passed; UsageError for a missing or malformed rank contract or a bad
// argument. Log lines go to stderr through the logger "hvrun.collectives", off unless HVRUN_LOG_LEVEL
// says otherwise (trace, debug, info, warn, error, off).
// A Communicator is used by one thread at a time.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <string>

#include "hvrun/data_type.hpp"
#include "hvrun/error.hpp"

namespace hvrun {

class StoreClient;

struct CommunicatorOptions {
  static constexpr std::chrono::milliseconds kDefaultTimeout{300'000};

  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  // Gloo's TCP device binds to this NIC (HVRUN_IFACE). Empty, or a NIC Gloo cannot use: `address`.
  std::string iface;
  std::string address;   // this host's address on that NIC (HVRUN_ADDR)
  std::string hostname;  // for messages (HVRUN_HOSTNAME)
  // The rendezvous store: a client to use (tests: one per rank thread), else where to connect.
  std::shared_ptr<StoreClient> store;
  std::string store_host;
  std::uint16_t store_port = 0;
  std::string store_token;
  // Deadline of the rendezvous and of each collective (HVRUN_COLLECTIVE_TIMEOUT, in seconds).
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // Prefix of this communicator's keys in the store. Empty: "comm<N>/", N counting the communicators
  // this rank made on this store, so every rank derives the same prefix for its N-th communicator.
  std::string store_prefix;
};

class Communicator {
 public:
  // From the rank contract: HVRUN_RANK, HVRUN_SIZE, HVRUN_LOCAL_RANK, HVRUN_LOCAL_SIZE, HVRUN_IFACE,
  // HVRUN_ADDR, HVRUN_HOSTNAME, HVRUN_STORE_ADDR, HVRUN_STORE_PORT, HVRUN_STORE_TOKEN and the optional
  // HVRUN_COLLECTIVE_TIMEOUT. Throws UsageError naming a missing or malformed variable
  // ("HVRUN_RANK is not set: run this program under hvrun").
  static CommunicatorOptions options_from_env();
  static Communicator init();

  // Connects to the store and every other rank (Gloo full mesh); returns when all ranks have.
  explicit Communicator(CommunicatorOptions options);
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;

  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  // The NIC in use: its name (or "" when Gloo bound by address) and what Gloo's device reports.
  const std::string& iface() const;
  const std::string& device_description() const;
  StoreClient& store();

  // ---- Host buffers (Gloo). Counts are elements; count 0 is allowed and does nothing. ----
  void allreduce(void* buffer, std::size_t count, DataType type, ReduceOp op);
  void allreduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  void broadcast(void* buffer, std::size_t count, DataType type, int root);
  // `recv` holds size() * count elements: rank r's `count` elements at offset r * count.
  void allgather(const void* send, void* recv, std::size_t count, DataType type);
  void barrier();

  template <typename T>
  void allreduce(std::span<T> buffer, ReduceOp op) {
    allreduce(buffer.data(), buffer.size(), data_type_of<std::remove_const_t<T>>(), op);
  }
  template <typename T>
  void broadcast(std::span<T> buffer, int root) {
    broadcast(buffer.data(), buffer.size(), data_type_of<T>(), root);
  }

  // ---- CUDA device buffers (NCCL). ----
  // Whether this library was built with NCCL; without it the gpu_ calls throw CollectiveError.
  static bool nccl_built();
  // Collective: makes the NCCL communicator on CUDA device `device` (-1: local_rank modulo the number
  // of devices). Rank 0 makes NCCL's unique id (bound per NCCL_SOCKET_IFNAME) and hands it to the
  // others through the store.
  void init_gpu(int device = -1);
  bool gpu_ready() const;
  int gpu_device() const;
  // Enqueue on `stream` (a cudaStream_t; nullptr: the communicator's own stream) and return; call
  // gpu_synchronize to wait. NCCL errors carry ncclGetErrorString and ncclGetLastError.
  // send == recv is in place.
  void gpu_allreduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op,
                     void* stream = nullptr);
  void gpu_broadcast(void* buffer, std::size_t count, DataType type, int root, void* stream = nullptr);
  void gpu_allgather(const void* send, void* recv, std::size_t count, DataType type, void* stream = nullptr);
  // Waits for `stream` (nullptr: ours) within the timeout, watching NCCL's asynchronous errors; on
  // timeout or error the NCCL communicator is aborted and later gpu_ calls fail.
  void gpu_synchronize(void* stream = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun
