// The NIC discovery driver (launcher/job/nic_discovery.hpp) on hand-made hosts: what it sends, how it uses
// the job's deadline, when it decides, what it probes again, and what it says when a host has no NIC.
#include <catch2/catch.hpp>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/check/check_run.hpp"
#include "launcher/job/nic_discovery.hpp"
#include "launcher/nic/probe_retry.hpp"

using hvrun::JobHost;
using hvrun::NicDiscovery;
using namespace std::chrono_literals;

namespace {

JobHost host(const std::string& name, const std::string& address) {
  JobHost h;
  h.name = name;
  hvrun::InterfaceInfo eth;
  eth.name = "eth0";
  eth.addresses = {address};
  eth.prefix_lengths = {24};
  eth.up = eth.running = true;
  eth.speed_mbps = 1000;
  h.hello = hvrun::HelloMsg{"v", name + ".lab", 1, 2, 4000, {eth}, "", "", name};
  h.life.attach();
  h.life.greet();
  h.life.ready(false, false);
  return h;
}

// The job's side of the hooks, recorded; two hosts, a (10.0.0.1) and b (10.0.0.2).
struct Job {
  boost::asio::io_context io;
  std::vector<JobHost> hosts;
  hvrun::LaunchOptions options;
  bool probing = true;
  std::vector<std::pair<std::size_t, hvrun::ProbeRequestMsg>> sent;
  std::chrono::milliseconds armed{0};
  std::function<void()> on_deadline;
  int cancels = 0;
  int decided = 0;

  Job() {
    hosts.push_back(host("a", "10.0.0.1"));
    hosts.push_back(host("b", "10.0.0.2"));
  }

  std::unique_ptr<NicDiscovery> discovery(std::vector<std::string> nics = {}) {
    return std::make_unique<NicDiscovery>(
        io, options, hosts, hvrun::NicFilter::parse(nics),
        NicDiscovery::Hooks{.probing = [this] { return probing; },
                            .arm_deadline = [this](std::chrono::milliseconds after,
                                                   std::function<void()> f) {
                              armed = after;
                              on_deadline = std::move(f);
                            },
                            .cancel_deadline = [this] { ++cancels; },
                            .send = [this](std::size_t i, const hvrun::ProbeRequestMsg& m) { sent.emplace_back(i, m); },
                            .decided = [this] {
                              ++decided;
                              probing = false;  // the job moves on (launch, report, shutdown)
                            }});
  }

  // Answers every probe sent so far with `outcome`, from the agent that got it.
  void answer(NicDiscovery& d, const std::string& outcome) {
    const auto requests = std::move(sent);
    sent.clear();
    for (const auto& [from, request] : requests)
      for (const auto& t : request.targets)
        d.add(from, hvrun::ProbeResultMsg{t.host, t.iface, t.address, *hvrun::probe_outcome_from_text(outcome), -1, 1, ""},
              hosts[from].name);
  }
};

}  // namespace

TEST_CASE("nic discovery: probes each host from the other, decides when every result is in", "[nic_discovery]") {
  Job job;
  job.options.probe_timeout = 700ms;
  auto d = job.discovery();
  CHECK(d->round() == nullptr);
  CHECK_FALSE(d->choice_of(0));
  d->start();
  REQUIRE(job.sent.size() == 2);
  CHECK(job.sent[0].first == 0);
  CHECK(job.sent[0].second.targets.at(0).host == 1);
  CHECK(job.sent[0].second.timeout_ms == 700);
  CHECK(job.armed == 700ms + 2000ms);  // the probe timeout and the slack, on the job's deadline
  job.answer(*d, "ok");
  CHECK(job.decided == 1);
  CHECK(job.cancels == 1);
  CHECK(d->all_chosen());
  CHECK(d->choice_of(1)->address == "10.0.0.2");
  CHECK(d->round()->probes_sent() == 2);
  job.io.run();  // the judgement posted after the first result finds the round over
  CHECK(job.decided == 1);
}

TEST_CASE("nic discovery: timeouts go again with longer timeouts, then it gives up", "[nic_discovery]") {
  Job job;
  job.options.probe_timeout = 1000ms;
  auto d = job.discovery();
  d->start();
  job.answer(*d, "timeout");
  CHECK(job.decided == 0);
  REQUIRE(job.sent.size() == 2);  // attempt 2
  CHECK(job.armed == hvrun::attempt_timeout(1000ms, 2) + 2000ms);
  CHECK(job.sent[0].second.timeout_ms == hvrun::attempt_timeout(1000ms, 2).count());
  job.answer(*d, "timeout");
  REQUIRE(job.sent.size() == 2);  // attempt 3, the last
  CHECK(job.armed == hvrun::attempt_timeout(1000ms, 3) + 2000ms);
  CHECK(job.decided == 0);
  job.on_deadline();  // nothing came back: the deadline judges what there is
  CHECK(job.decided == 1);
  CHECK_FALSE(d->all_chosen());
  const std::string why = hvrun::unusable_text(hvrun::check_report_of(job.hosts, d->round(), d->report_base()),
                                              job.options.probe_timeout, d->round()->attempts());
  CHECK(why.find("\nhvrun: gave up after ") != std::string::npos);
  CHECK(why.back() != '\n');
}

TEST_CASE("nic discovery: nothing after the job stopped probing; the filter's usage error", "[nic_discovery]") {
  Job job;
  auto d = job.discovery();
  d->start();
  job.probing = false;  // the job failed meanwhile: the deadline's decide does nothing
  job.on_deadline();
  CHECK(job.decided == 0);
  CHECK(job.cancels == 0);

  Job other;
  auto filtered = other.discovery({"ib0"});
  CHECK_THROWS_AS(filtered->start(), hvrun::UsageError);
  CHECK(other.sent.empty());
}

TEST_CASE("nic discovery: destroyed with its judgement and its deadline still queued, both do nothing",
          "[nic_discovery]") {
  // The elastic driver ends each admission round by destroying it, while a judgement the round posted
  // after a result, or its deadline, may still be queued (the sanitized suite sees any use after that).
  Job job;
  auto d = job.discovery();
  d->start();
  REQUIRE(job.sent.size() == 2);
  const auto [from, request] = job.sent.front();
  const auto& t = request.targets.at(0);
  d->add(from, hvrun::ProbeResultMsg{t.host, t.iface, t.address, *hvrun::probe_outcome_from_text("ok"), -1, 1, ""},
         job.hosts[from].name);
  CHECK(job.decided == 0);  // one of two results: a judgement is posted
  d.reset();
  CHECK(job.io.run() == 1);  // the judgement ran, and did nothing
  job.on_deadline();
  CHECK(job.decided == 0);
  CHECK(job.cancels == 0);
}
