#include "hvrun/communicator.hpp"

#include <limits>
#include <map>
#include <mutex>
#include "collectives/collectives_log.hpp"

#include "common/error.hpp"
#include "collectives/gloo_backend.hpp"
#include "collectives/rank_contract.hpp"
#include "collectives/store_client.hpp"
#if HVRUN_HAVE_NCCL
#include "collectives/nccl_backend.hpp"
#endif

namespace hvrun {

namespace {

// "comm<N>/" for the N-th communicator a rank makes on a store. Counted per (store, rank) rather than
// per process, so ranks that are threads of one process (tests) agree as processes do.
std::string next_prefix(const std::string& store_endpoint, int rank) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, int> made;
  std::lock_guard lock(mutex);
  return "comm" + std::to_string(made[{store_endpoint, rank}]++) + "/";
}

void validate(const CommunicatorOptions& o) {
  if (o.size < 1) throw UsageError("hvrun collectives: size " + std::to_string(o.size) + " is not a number of ranks");
  if (o.rank < 0 || o.rank >= o.size)
    throw UsageError("hvrun collectives: rank " + std::to_string(o.rank) + " is outside 0.." +
                     std::to_string(o.size - 1));
  if (o.local_size < 1 || o.local_rank < 0 || o.local_rank >= o.local_size)
    throw UsageError("hvrun collectives: local rank " + std::to_string(o.local_rank) + " is outside 0.." +
                     std::to_string(o.local_size - 1));
  if (!o.store && (o.store_host.empty() || o.store_port == 0 || o.store_token.empty()))
    throw UsageError("hvrun collectives: no rendezvous store (give a StoreClient, or store host, port and token)");
  if (o.timeout <= std::chrono::milliseconds(0)) throw UsageError("hvrun collectives: the timeout must be positive");
}

}  // namespace

struct Communicator::Impl {
  CommunicatorOptions options;
  std::string prefix;
  std::unique_ptr<GlooBackend> gloo;
#if HVRUN_HAVE_NCCL
  std::unique_ptr<NcclBackend> nccl;
#endif

  std::string where() const {
    return "rank " + std::to_string(options.rank) + " of " + std::to_string(options.size) +
           (options.hostname.empty() ? "" : " on " + options.hostname);
  }

  void require_gpu(const char* what) const {
#if HVRUN_HAVE_NCCL
    if (!nccl) throw CollectiveError("hvrun collectives: " + std::string(what) + " on " + where() + ": call init_gpu() first");
#else
    throw CollectiveError("hvrun collectives: " + std::string(what) + " on " + where() +
                          ": this build of hvrun has no NCCL (configure with -DHVRUN_WITH_NCCL=ON where NCCL is installed)");
#endif
  }

  void check_count(std::size_t count, DataType type, const char* what) const {
    const std::size_t limit = std::numeric_limits<std::size_t>::max() / data_type_size(type) /
                              static_cast<std::size_t>(options.size);
    if (count > limit)
      throw CollectiveError("hvrun collectives: " + std::string(what) + " of " + std::to_string(count) +
                            " elements is too large");
  }
};

CommunicatorOptions Communicator::options_from_env() { return options_from_rank_contract(); }

Communicator Communicator::init() { return Communicator(options_from_env()); }

Communicator::Communicator(CommunicatorOptions options) : impl_(std::make_unique<Impl>()) {
  validate(options);
  impl_->options = std::move(options);
  auto& o = impl_->options;
  if (!o.store) {
    StoreClientOptions so;
    so.host = o.store_host;
    so.port = o.store_port;
    so.token = o.store_token;
    so.timeout = o.timeout;
    o.store = std::make_shared<StoreClient>(std::move(so));
  }
  impl_->prefix = o.store_prefix.empty() ? next_prefix(o.store->endpoint(), o.rank) : o.store_prefix;
  impl_->gloo = std::make_unique<GlooBackend>(o, *o.store, impl_->prefix);
  // Debug, not info: a library does not write into a training program's output unasked.
  collectives_log().debug("{} connected; Gloo on {}", impl_->where(), impl_->gloo->description());
}

Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;

int Communicator::rank() const { return impl_->options.rank; }
int Communicator::size() const { return impl_->options.size; }
int Communicator::local_rank() const { return impl_->options.local_rank; }
int Communicator::local_size() const { return impl_->options.local_size; }
const std::string& Communicator::iface() const { return impl_->gloo->iface(); }
const std::string& Communicator::device_description() const { return impl_->gloo->description(); }
StoreClient& Communicator::store() { return *impl_->options.store; }

void Communicator::allreduce(void* buffer, std::size_t count, DataType type, ReduceOp op) {
  allreduce(buffer, buffer, count, type, op);
}

void Communicator::allreduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op) {
  impl_->check_count(count, type, "allreduce");
  impl_->gloo->allreduce(send, recv, count, type, op);
}

void Communicator::broadcast(void* buffer, std::size_t count, DataType type, int root) {
  impl_->check_count(count, type, "broadcast");
  impl_->gloo->broadcast(buffer, count, type, root);
}

void Communicator::allgather(const void* send, void* recv, std::size_t count, DataType type) {
  impl_->check_count(count, type, "allgather");
  impl_->gloo->allgather(send, recv, count, type);
}

void Communicator::barrier() { impl_->gloo->barrier(); }

bool Communicator::nccl_built() { return HVRUN_HAVE_NCCL != 0; }

void Communicator::init_gpu([[maybe_unused]] int device) {
#if HVRUN_HAVE_NCCL
  if (impl_->nccl) return;
  const auto& o = impl_->options;
  impl_->nccl = std::make_unique<NcclBackend>(o.rank, o.size, o.local_rank, device, *o.store,
                                              impl_->prefix + "nccl/unique_id", o.timeout,
                                              "hvrun collectives: " + impl_->where());
#else
  impl_->require_gpu("init_gpu");
#endif
}

bool Communicator::gpu_ready() const {
#if HVRUN_HAVE_NCCL
  return impl_->nccl != nullptr;
#else
  return false;
#endif
}

int Communicator::gpu_device() const {
#if HVRUN_HAVE_NCCL
  if (impl_->nccl) return impl_->nccl->device();
#endif
  return -1;
}

void Communicator::gpu_allreduce([[maybe_unused]] const void* send, [[maybe_unused]] void* recv,
                                 [[maybe_unused]] std::size_t count, [[maybe_unused]] DataType type,
                                 [[maybe_unused]] ReduceOp op, [[maybe_unused]] void* stream) {
  impl_->require_gpu("gpu_allreduce");
#if HVRUN_HAVE_NCCL
  impl_->nccl->allreduce(send, recv, count, type, op, stream);
#endif
}

void Communicator::gpu_broadcast([[maybe_unused]] void* buffer, [[maybe_unused]] std::size_t count,
                                 [[maybe_unused]] DataType type, [[maybe_unused]] int root,
                                 [[maybe_unused]] void* stream) {
  impl_->require_gpu("gpu_broadcast");
#if HVRUN_HAVE_NCCL
  if (root < 0 || root >= impl_->options.size)
    throw CollectiveError("hvrun collectives: gpu_broadcast from rank " + std::to_string(root) + ": no such rank");
  impl_->nccl->broadcast(buffer, count, type, root, stream);
#endif
}

void Communicator::gpu_allgather([[maybe_unused]] const void* send, [[maybe_unused]] void* recv,
                                 [[maybe_unused]] std::size_t count, [[maybe_unused]] DataType type,
                                 [[maybe_unused]] void* stream) {
  impl_->require_gpu("gpu_allgather");
#if HVRUN_HAVE_NCCL
  impl_->nccl->allgather(send, recv, count, type, stream);
#endif
}

void Communicator::gpu_synchronize([[maybe_unused]] void* stream) {
  impl_->require_gpu("gpu_synchronize");
#if HVRUN_HAVE_NCCL
  impl_->nccl->synchronize(stream);
#endif
}

}  // namespace hvrun
