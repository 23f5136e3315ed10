#include "launcher/start/connector.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <algorithm>
#include <deque>
#include <mutex>
#include <thread>

#include "common/error.hpp"
#include "common/invariant.hpp"
#include "common/user_message.hpp"
#include "launcher/start/agent_starter.hpp"

namespace hvrun {

// Shared by the Connector and its threads. `io` and `on_connected` are valid while `open`; a result
// posted while open is dropped on the loop if the Connector went away before it ran.
struct Connector::Mailbox {
  std::mutex mutex;
  bool open = true;
  boost::asio::io_context* io = nullptr;
  OnConnected on_connected;
  OnTurn on_turn;
  OnShell on_shell;
  StartAgent start;
  std::size_t concurrency = 1;
  std::deque<std::pair<std::size_t, std::string>> queue;  // hosts not started yet
  std::size_t threads = 0;                                 // connection threads running

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

  // Posts `callback_of(*self)(index)` to the loop, where it runs if the Connector is still there.
  template <typename Callback>
  void notify(const std::shared_ptr<Mailbox>& self, std::size_t index, Callback Mailbox::*member) {
    if (!((*self).*member)) return;
    boost::asio::post(*io, [self, index, member] {
      Callback callback;
      {
        std::lock_guard lock(self->mutex);
        if (!self->open) return;
        callback = (*self).*member;
      }
      callback(index);
    });
  }
};

Connector::Connector(boost::asio::io_context& io, StartAgent start, OnConnected on_connected,
                     std::size_t concurrency, OnTurn on_turn, OnShell on_shell)
    : mailbox_(std::make_shared<Mailbox>()) {
  mailbox_->io = &io;
  mailbox_->on_connected = std::move(on_connected);
  mailbox_->on_turn = std::move(on_turn);
  mailbox_->on_shell = std::move(on_shell);
  mailbox_->start = std::move(start);
  mailbox_->concurrency = std::max<std::size_t>(concurrency, 1);
}

Connector::~Connector() {
  std::lock_guard lock(mailbox_->mutex);
  mailbox_->open = false;
  mailbox_->queue.clear();
}

void Connector::connect(std::size_t index, const std::string& name) {
  {
    std::lock_guard lock(mailbox_->mutex);
    mailbox_->queue.emplace_back(index, name);
    if (mailbox_->threads >= mailbox_->concurrency) return;  // a running thread will take it
    ++mailbox_->threads;
  }
  try {
    std::thread([box = mailbox_] { work(box); }).detach();
  } catch (...) {
    std::lock_guard lock(mailbox_->mutex);
    --mailbox_->threads;
    throw;
  }
}

std::size_t Connector::threads() const {
  std::lock_guard lock(mailbox_->mutex);
  return mailbox_->threads;
}

// One connection thread: starts queued hosts one after the other until none is left.
void Connector::work(const std::shared_ptr<Mailbox>& box) {
  for (;;) {
    std::pair<std::size_t, std::string> host;
    StartAgent start;
    {
      std::lock_guard lock(box->mutex);
      if (!box->open || box->queue.empty()) {
        --box->threads;
        return;
      }
      host = std::move(box->queue.front());
      box->queue.pop_front();
      start = box->start;
      box->notify(box, host.first, &Mailbox::on_turn);
    }
    std::shared_ptr<HostAgent> agent;
    std::string error;
    try {
      agent = start(host.second, [&box, index = host.first] {
        std::lock_guard lock(box->mutex);
        if (box->open) box->notify(box, index, &Mailbox::on_shell);
      });
    } catch (const std::exception& e) {
      error = user_message(e, "starting the agent on " + host.second);
    }
    box->deliver(box, host.first, std::move(agent), std::move(error));
  }
}

Connector::StartAgent Connector::host_agent_starter(const LaunchOptions& options, const std::string& agent_path) {
  return [options, agent_path](const std::string& host, const std::function<void()>& shell_started) {
    return start_host_agent(options, host, agent_path, shell_started);
  };
}

}  // namespace hvrun
