#pragma once
// A blocking client of the job's rendezvous store (agent/store_server.hpp), as ranks use it: every call
// has a deadline; a get or wait that runs out names the keys still missing; the first connection retries
// until connect_timeout, because the server may come up a moment after the ranks.
//
// One StoreClient serialises its calls (a mutex), so threads may share it, but a blocking get holds the
// others up; threads that wait on different keys at once should each have their own client. Processes
// each have their own.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hvrun {

struct StoreClientOptions {
  static constexpr std::chrono::milliseconds kDefaultConnectTimeout{30'000};
  static constexpr std::chrono::milliseconds kDefaultTimeout{300'000};

  std::string host;  // IP address (HVRUN_STORE_ADDR) or host name
  std::uint16_t port = 0;
  std::string token;  // HVRUN_STORE_TOKEN; never sent, only proven (see common/store_protocol.hpp)
  // How long the first connection (and any reconnection) keeps retrying.
  std::chrono::milliseconds connect_timeout = kDefaultConnectTimeout;
  // Default deadline of get and wait, and the deadline of every other call.
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

class StoreClient {
 public:
  // Connects and authenticates (retrying until connect_timeout). Throws TimeoutError when the server
  // never answered, Error when it refused the token or is not an hvrun store.
  explicit StoreClient(StoreClientOptions options);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  void set(const std::string& key, std::string_view value);
  // Blocks until the key exists. TimeoutError: "store: timed out after 30 s waiting for keys: rank3/addr".
  std::string get(const std::string& key);
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  // Blocks until every key exists; values in the order of `keys`.
  std::vector<std::string> multi_get(const std::vector<std::string>& keys);
  std::vector<std::string> multi_get(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  void wait(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // Adds `delta` to the integer at `key` (absent counts as 0) atomically; returns the new value.
  std::int64_t add(const std::string& key, std::int64_t delta);
  // Whether every key exists, without waiting.
  bool check(const std::vector<std::string>& keys);
  // Removes the key; whether it existed.
  bool remove(const std::string& key);

  // "host:port", as messages name the store.
  const std::string& endpoint() const;
  const StoreClientOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun
