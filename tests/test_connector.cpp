// The connector (launcher/start/connector.hpp): hosts connect on a bounded pool of threads, each result
// reaches the event loop once, and a result that comes after the connector is gone is dropped with
// its agent. Fake agents: no SSH, no binary.
#include <catch2/catch.hpp>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <vector>
#include <thread>

#include "common/error.hpp"
#include "launcher/start/connector.hpp"

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
      [](const std::string& host, const std::function<void()>&) -> std::unique_ptr<hvrun::HostAgent> {
        if (host == "down") throw hvrun::Error("down: connection refused; is sshd running there?");
        if (host == "odd") throw std::runtime_error("[json.exception] something a library says");
        return std::make_unique<FakeAgent>(host);
      },
      [&](std::size_t i, std::shared_ptr<hvrun::HostAgent> agent, const std::string& error) {
        ++calls[i];
        outcomes[i] = {agent ? agent->agent_description() : "", error, std::this_thread::get_id()};
        if (outcomes.size() == 4) guard.reset();
      },
      2);
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
        [started, destroyed, released](const std::string& host, const std::function<void()>&) -> std::unique_ptr<hvrun::HostAgent> {
          started->set_value();
          released.wait();
          return std::make_unique<FakeAgent>(host, destroyed);
        },
        [&](std::size_t, std::shared_ptr<hvrun::HostAgent>, const std::string&) { called = true; }, 4);
    connector.connect(0, "slow");
    up.wait();
  }
  release->set_value();
  // The thread finds the mailbox closed and drops the agent; bounded so a bug fails instead of hanging.
  REQUIRE(gone.wait_for(60s) == std::future_status::ready);
  io.poll();
  CHECK_FALSE(called);
}

TEST_CASE("connector: at most `concurrency` hosts start at once, every host is started in order, the threads end",
          "[connector]") {
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  constexpr std::size_t kHosts = 40, kConcurrency = 3;
  std::mutex mu;
  std::size_t running = 0, most = 0;
  std::vector<std::string> started;
  std::map<std::size_t, std::string> results;
  std::map<std::size_t, int> turns;
  std::vector<std::size_t> turn_order;
  const auto loop_thread = std::this_thread::get_id();
  hvrun::Connector connector(
      io,
      [&](const std::string& host, const std::function<void()>&) -> std::unique_ptr<hvrun::HostAgent> {
        {
          std::lock_guard lock(mu);
          most = std::max(most, ++running);
          started.push_back(host);
        }
        std::this_thread::sleep_for(2ms);  // long enough for the others to pile up
        {
          std::lock_guard lock(mu);
          --running;
        }
        return std::make_unique<FakeAgent>(host);
      },
      [&](std::size_t i, std::shared_ptr<hvrun::HostAgent> agent, const std::string& error) {
        CHECK(turns.count(i) == 1);  // its turn was announced before its result
        results[i] = agent ? agent->agent_description() : error;
        if (results.size() == kHosts) guard.reset();
      },
      kConcurrency, [&](std::size_t i) {
        CHECK(std::this_thread::get_id() == loop_thread);
        ++turns[i];
        turn_order.push_back(i);
      });
  for (std::size_t i = 0; i < kHosts; ++i) connector.connect(i, "h" + std::to_string(i));
  CHECK(connector.threads() <= kConcurrency);
  io.run_for(60s);
  REQUIRE(results.size() == kHosts);
  for (std::size_t i = 0; i < kHosts; ++i) CHECK(results[i] == "h" + std::to_string(i));
  CHECK(most <= kConcurrency);
  CHECK(most >= 2);  // they did run side by side
  // Queued hosts are taken in order (each thread takes the next one; the turns below are announced as
  // they are taken), and each turn is announced once. Which thread reaches `start` first after taking
  // its host is the scheduler's: `started` holds every host exactly once, in no guaranteed order.
  std::vector<std::string> every = started;
  std::sort(every.begin(), every.end(), [](const std::string& a, const std::string& b) {
    return std::stoul(a.substr(1)) < std::stoul(b.substr(1));
  });
  REQUIRE(every.size() == kHosts);
  for (std::size_t i = 0; i < kHosts; ++i) CHECK(every[i] == "h" + std::to_string(i));
  REQUIRE(turn_order.size() == kHosts);
  CHECK(std::is_sorted(turn_order.begin(), turn_order.end()));
  for (int spin = 0; spin < 6000 && connector.threads() != 0; ++spin) std::this_thread::sleep_for(10ms);
  CHECK(connector.threads() == 0);
}

TEST_CASE("connector: hosts still queued when the connector goes are never started", "[connector]") {
  asio::io_context io;
  auto release = std::make_shared<std::promise<void>>();
  auto released = release->get_future().share();
  auto count = std::make_shared<std::atomic<int>>(0);
  auto first = std::make_shared<std::promise<void>>();
  auto first_started = first->get_future();
  {
    hvrun::Connector connector(
        io,
        [count, released, first](const std::string& host, const std::function<void()>&) -> std::unique_ptr<hvrun::HostAgent> {
          if (count->fetch_add(1) == 0) first->set_value();
          released.wait();
          return std::make_unique<FakeAgent>(host);
        },
        [](std::size_t, std::shared_ptr<hvrun::HostAgent>, const std::string&) {}, 1);
    for (std::size_t i = 0; i < 5; ++i) connector.connect(i, "h" + std::to_string(i));
    REQUIRE(first_started.wait_for(60s) == std::future_status::ready);
  }
  release->set_value();
  std::this_thread::sleep_for(200ms);  // time for a wrongly started second host to show
  CHECK(count->load() == 1);
}
