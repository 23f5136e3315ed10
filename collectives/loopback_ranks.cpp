#include "collectives/loopback_ranks.hpp"

#include <memory>

namespace hvrun::bench {

CommunicatorOptions loopback_rank_options(int rank, int size, const StoreClientOptions& store,
                                          std::chrono::milliseconds timeout) {
  CommunicatorOptions o;
  o.rank = rank;
  o.size = size;
  o.local_rank = rank;
  o.local_size = size;
  o.iface = "lo";
  o.address = "127.0.0.1";
  o.hostname = "localhost";
  o.store = std::make_shared<StoreClient>(store);
  o.timeout = timeout;
  return o;
}

}  // namespace hvrun::bench
