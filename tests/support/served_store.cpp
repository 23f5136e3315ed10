#include "tests/support/served_store.hpp"

#include "common/job_secret.hpp"

namespace hvrun::test {

ServedStore::ServedStore(StoreServerOptions options)
    : token_(JobSecret::generate().hex()),
      server_(std::make_unique<StoreServer>(io_, token_, "127.0.0.1", 0, options)),
      port_(server_->port()),
      thread_([this] { io_.run(); }) {}

ServedStore::~ServedStore() {
  boost::asio::post(io_, [this] {
    server_->close();
    io_.stop();
  });
  thread_.join();
}

StoreClientOptions ServedStore::client_options(std::chrono::milliseconds timeout) const {
  StoreClientOptions o;
  o.host = "127.0.0.1";
  o.port = port_;
  o.token = token_;
  o.connect_timeout = std::chrono::seconds(10);
  o.timeout = timeout;
  return o;
}

std::vector<std::string> ServedStore::env() const {
  return {"HVRUN_STORE_ADDR=127.0.0.1", "HVRUN_STORE_PORT=" + std::to_string(port_), "HVRUN_STORE_TOKEN=" + token_};
}

}  // namespace hvrun::test
