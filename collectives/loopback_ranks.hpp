#pragma once
// Ranks as threads of one process on loopback (the collectives' tests, hvrun-store-bench): the
// Communicator options each of them starts from.
#include <chrono>

#include "collectives/store_client.hpp"
#include "hvrun/communicator.hpp"

namespace hvrun::bench {

// Rank `rank` of `size`, every rank local (one host): Gloo on lo at 127.0.0.1, hostname "localhost",
// its own StoreClient made from `store`, and `timeout` for every wait of the communicator.
CommunicatorOptions loopback_rank_options(int rank, int size, const StoreClientOptions& store,
                                          std::chrono::milliseconds timeout);

}  // namespace hvrun::bench
