#include "collectives/gloo_store.hpp"

namespace hvrun {

// Errors (TimeoutError naming the keys, Error for a lost store) pass through Gloo unchanged; the
// Communicator adds which rank was connecting.

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  client_.set(key, std::string_view(data.data(), data.size()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  const std::string value = client_.get(key, timeout_);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { client_.wait(keys, timeout_); }

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  // Gloo passes its context's timeout; ours may be tighter.
  client_.wait(keys, std::min(timeout, timeout_));
}

}  // namespace hvrun
