// The connector (launcher/connector.hpp): every host connects on a thread of its own, each result
// reaches the event loop once, and a result that comes after the connector is gone is dropped with
// its agent. Fake agents: no SSH, no binary.
#include <catch2/catch.hpp>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <map>
#include <thread>

#include "agent/wire/error.hpp"
#include "launcher/connector.hpp"

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

class FakeAgent : public hvrun::HostAgent {
 public:
  explicit FakeAgent(std::string host, std::shared_ptr<std::promise<void>> destroyed = nullptr)
      : host_(std::move(host)), destroyed_(std::move(destroyed)) {}
  ~FakeAgent() override {
    if (destroyed_) destroyed_->set_value();
  }
  hvrun::UniqueFd take_channel() override { return {}; }
  std::string stderr_tail() const override { return {}; }
  const std::string& agent_description() const override { return host_; }

 private:
  std::string host_;
  std::shared_ptr<std::promise<void>> destroyed_;
};

struct Outcome {
  std::string agent;  // its description: the host it was started for
  std::string error;
  std::thread::id thread;
};

}  // namespace

TEST_CASE("connector: each host's result reaches the event loop once, errors in one line naming the host",
          "[connector]") {
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  std::map<std::size_t, Outcome> outcomes;
  std::map<std::size_t, int> calls;
  hvrun::Connector connector(
      io,
      [](const std::string& host) -> std::unique_ptr<hvrun::HostAgent> {
        if (host == "down") throw hvrun::Error("down: connection refused; is sshd running there?");
        if (host == "odd") throw std::runtime_error("[json.exception] something a library says");
        return std::make_unique<FakeAgent>(host);
      },
      [&](std::size_t i, std::shared_ptr<hvrun::HostAgent> agent, const std::string& error) {
        ++calls[i];
        outcomes[i] = {agent ? agent->agent_description() : "", error, std::this_thread::get_id()};
        if (outcomes.size() == 4) guard.reset();
      });
  connector.connect(0, "a");
  connector.connect(1, "down");
  connector.connect(2, "b");
  connector.connect(3, "odd");
  io.run_for(60s);  // ends as soon as all four came (the guard is released); the bound only stops a hang
  REQUIRE(outcomes.size() == 4);
  for (const auto& [i, n] : calls) CHECK(n == 1);
  for (const auto& [i, o] : outcomes) CHECK(o.thread == std::this_thread::get_id());
  CHECK(outcomes[0].agent == "a");
  CHECK(outcomes[0].error.empty());
  CHECK(outcomes[2].agent == "b");
  CHECK(outcomes[1].agent.empty());
  CHECK(outcomes[1].error == "down: connection refused; is sshd running there?");
  CHECK(outcomes[3].agent.empty());
  CHECK_THAT(outcomes[3].error, Catch::Contains("starting the agent on odd"));
}

TEST_CASE("connector: a host that connects after the connector is gone is dropped, and its agent closed",
          "[connector]") {
  asio::io_context io;
  // Shared with the connection thread, which outlives this test's scope by a little.
  auto release = std::make_shared<std::promise<void>>();
  auto started = std::make_shared<std::promise<void>>();
  auto destroyed = std::make_shared<std::promise<void>>();
  auto released = release->get_future().share();
  auto gone = destroyed->get_future();
  auto up = started->get_future();
  bool called = false;
  {
    hvrun::Connector connector(
        io,
        [started, destroyed, released](const std::string& host) -> std::unique_ptr<hvrun::HostAgent> {
          started->set_value();
          released.wait();
          return std::make_unique<FakeAgent>(host, destroyed);
        },
        [&](std::size_t, std::shared_ptr<hvrun::HostAgent>, const std::string&) { called = true; });
    connector.connect(0, "slow");
    up.wait();
  }
  release->set_value();
  // The thread finds the mailbox closed and drops the agent; bounded so a bug fails instead of hanging.
  REQUIRE(gone.wait_for(60s) == std::future_status::ready);
  io.poll();
  CHECK_FALSE(called);
}
