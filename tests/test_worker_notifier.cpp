// launcher/elastic/worker_notifier.hpp against Horovod 0.28.1's own WorkerNotificationService
// (tests/horovod/notification_peer.py serve): the update reaches the worker's manager past an address
// that refuses and one that never answers; a wrong key and a worker nobody answers for end with why.
#include <catch2/catch.hpp>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <filesystem>
#include <optional>

#include "common/horovod_pickle.hpp"
#include "common/job_secret.hpp"
#include "launcher/elastic/worker_notifier.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/horovod_site.hpp"

using namespace hvrun;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace asio = boost::asio;

namespace {

WorkerNotice notify(const HorovodWorkerAddresses& worker, std::chrono::milliseconds timeout) {
  asio::io_context io;
  WorkerNotifier notifier(io);
  std::optional<WorkerNotice> notice;
  notifier.notify(worker, 1764700000, HorovodHostUpdate::kRemoved, timeout, [&](WorkerNotice n) { notice = std::move(n); });
  io.run_for(timeout + 5s);
  REQUIRE(notice);
  return *notice;
}

// A port that takes connections (the kernel's backlog) and never answers: a worker whose service hangs.
struct SilentPort {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  int port() const { return acceptor.local_endpoint().port(); }
};

}  // namespace

TEST_CASE("hvrun's driver tells Horovod's own worker notification service that hosts changed",
          "[integration][elastic]") {
  const auto site = hvrun::test::horovod_site();
  if (!site) {
    WARN(hvrun::test::horovod_missing());
    return;
  }
  const std::string key = hex_decode(std::string(64, 'b'));
  hvrun::test::ChildProcess worker({hvrun::test::kDebianPython, hvrun::test::source_dir() + "/tests/horovod/notification_peer.py",
                                    "serve", hex_encode(key), "1"},
                                   {"PYTHONPATH=" + *site});
  REQUIRE(worker.wait_for_stdout("\n", 1, 60s));
  const std::string line = worker.stdout_so_far();
  REQUIRE(line.rfind("put ", 0) == 0);
  HorovodWorkerAddresses published = decode_worker_addresses_put(line.substr(4, line.find('\n') - 4), "the worker");

  SECTION("past an address that refuses and one that never answers") {
    SilentPort silent;
    HorovodWorkerAddresses w = published;
    w.by_nic.insert(w.by_nic.begin(), {"dead0", {{"127.0.0.1", 1}, {"127.0.0.1", silent.port()}}});
    const auto t0 = std::chrono::steady_clock::now();
    const WorkerNotice n = notify(w, 10s);
    INFO(n.detail);
    CHECK(n.acked);
    CHECK(n.source_address != "");
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);  // the silent address did not hold it to the deadline
    auto r = worker.wait(30s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("updated 1764700000 1 HostUpdateResult"));
  }
  SECTION("under another key: no answer, and the worker's manager hears only the genuine update after it") {
    HorovodWorkerAddresses w = published;
    w.key = std::string(32, 'z');
    const WorkerNotice forged = notify(w, 10s);
    CHECK_FALSE(forged.acked);
    CHECK_THAT(forged.detail, Catch::Contains("closed without an answer (a wrong key, or not Horovod's service)"));
    CHECK(notify(published, 10s).acked);
    auto r = worker.wait(30s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    const std::string& all = r.out;
    CHECK(all.find("updated ") != std::string::npos);
    CHECK(all.find("updated ") == all.rfind("updated "));
  }
}

TEST_CASE("a worker notice with nobody answering ends at its deadline and names each address", "[unit][elastic]") {
  SilentPort silent;
  HorovodWorkerAddresses w;
  w.key = std::string(32, 'k');
  w.by_nic = {{"eth0", {{"127.0.0.1", 1}}}, {"ib0", {{"127.0.0.1", silent.port()}}}};
  const WorkerNotice n = notify(w, 1s);
  CHECK_FALSE(n.acked);
  CHECK(n.detail == "127.0.0.1:1 refused; no answer within 1 s");
  w.by_nic = {{"eth0", {{"127.0.0.1", 1}}}, {"eth1", {{"not-an-ip", 5}}}};
  CHECK(notify(w, 1s).detail == "not-an-ip:5 not an address; 127.0.0.1:1 refused");  // in the order they ended
  w.by_nic.clear();
  CHECK(notify(w, 1s).detail == "the worker published no address");
}

TEST_CASE("a worker notice whose io_context goes away mid-flight leaves no socket and no memory behind",
          "[unit][elastic]") {
  const auto open_fds = [] {
    return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{});
  };
  SilentPort silent;
  HorovodWorkerAddresses w;
  w.key = std::string(32, 'k');
  w.by_nic = {{"eth0", {{"127.0.0.1", silent.port()}, {"127.0.0.1", silent.port()}}}};
  const auto before = open_fds();
  bool called = false;
  {
    asio::io_context io;
    WorkerNotifier notifier(io);
    notifier.notify(w, 1, HorovodHostUpdate::kAdded, 60s, [&](WorkerNotice) { called = true; });
    io.run_for(200ms);  // both connected, both waiting for an answer that never comes
  }
  CHECK_FALSE(called);
  CHECK(open_fds() == before);  // the sockets closed with the operations; LeakSanitizer checks the memory
}
