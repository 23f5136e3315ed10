#include "launcher/connector.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <mutex>
#include <thread>

#include "agent/wire/error.hpp"
#include "agent/wire/invariant.hpp"
#include "launcher/agent_starter.hpp"

namespace hvrun {

// Shared by the Connector and its threads. `io` and `on_connected` are valid while `open`; a result
// posted while open is dropped on the loop if the Connector went away before it ran.
struct Connector::Mailbox {
  std::mutex mutex;
  bool open = true;
  boost::asio::io_context* io = nullptr;
  OnConnected on_connected;

  void deliver(const std::shared_ptr<Mailbox>& self, std::size_t index, std::shared_ptr<HostAgent> agent,
               std::string error) {
    std::lock_guard lock(mutex);
    if (!open) return;
    HVRUN_INVARIANT(io != nullptr);  // set by the Connector that made this mailbox
    boost::asio::post(*io, [self, index, agent = std::move(agent), error = std::move(error)]() mutable {
      OnConnected callback;
      {
        std::lock_guard lock(self->mutex);
        if (!self->open) return;
        callback = self->on_connected;
      }
      callback(index, std::move(agent), error);
    });
  }
};

Connector::Connector(boost::asio::io_context& io, StartAgent start, OnConnected on_connected)
    : mailbox_(std::make_shared<Mailbox>()), start_(std::move(start)) {
  mailbox_->io = &io;
  mailbox_->on_connected = std::move(on_connected);
}

Connector::~Connector() {
  std::lock_guard lock(mailbox_->mutex);
  mailbox_->open = false;
}

void Connector::connect(std::size_t index, const std::string& name) {
  std::thread([box = mailbox_, start = start_, name, index] {
    std::shared_ptr<HostAgent> agent;
    std::string error;
    try {
      agent = start(name);
    } catch (const std::exception& e) {
      error = user_message(e, "starting the agent on " + name);
    }
    box->deliver(box, index, std::move(agent), std::move(error));
  }).detach();
}

Connector::StartAgent Connector::host_agent_starter(const LaunchOptions& options, const std::string& agent_path) {
  return [options, agent_path](const std::string& host) { return start_host_agent(options, host, agent_path); };
}

}  // namespace hvrun
