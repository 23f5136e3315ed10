#pragma once
// Private: Gloo's rendezvous::Store on the job's store, so gloo::rendezvous::Context can connect its
// full mesh through it. Gloo calls get() expecting it to block until the key exists.
#include <gloo/rendezvous/store.h>

#include <chrono>

#include "collectives/store_client.hpp"

namespace hvrun {

class GlooStore : public gloo::rendezvous::Store {
 public:
  // `timeout`: how long get() and the one-argument wait() block.
  GlooStore(StoreClient& client, std::chrono::milliseconds timeout) : client_(client), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  StoreClient& client_;
  std::chrono::milliseconds timeout_;
};

}  // namespace hvrun
