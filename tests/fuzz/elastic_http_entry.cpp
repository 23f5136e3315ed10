// Fuzz target body: the HTTP side of common/horovod_rendezvous.hpp's HorovodRendezvous in elastic
// mode, which answers whatever reaches the launcher's rendezvous port from a job's host. Per input: a
// fresh server on 127.0.0.1 (port 0, small limits) in one reused io_context, one TCP connection that
// writes the whole input and then shuts its write side, and the io_context run in small steps until the
// server closed the connection, held a rank_and_size request, or ~300 ms passed. The elastic hooks:
// rank_and_size answers its calls in turn "0,2,0,1,0,2" (at once, then again, which must be ignored),
// "-1,-1,-1,-1,-1,-1" (likewise), and the third is held, then dropped (or, for inputs of odd size,
// answered only after close(), which must do nothing); worker_addresses records what it got;
// global_rank_published checks that it is given a rank that is not negative.
//
// The server documents no failure for bytes a peer sends, so nothing is swallowed. Checked: every
// answer is "HTTP/x.y NNN ..." with a Content-Length, NNN among the statuses the server sends (200,
// 400, 404, 405, 413, 431, 507) and x.y 1.1 or a version the input named (answers echo the request's
// version; refusals say 1.1); no ignored answer is ever sent; the hooks see a non-empty host, a local
// rank >= 0, and decoded worker addresses with a key of the secret's size and ports in range; the
// server never holds more keys than its bound nor more than our one connection; and after close() it
// holds no connection and no key.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>

#include "common/horovod_pickle.hpp"
#include "common/horovod_rendezvous.hpp"
#include "common/log.hpp"
#include "common/unique_fd.hpp"
#include "launcher/ssh/tcp_dial.hpp"
#include "tests/fuzz/fuzz_entries.hpp"

namespace hvrun::fuzz {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxKeys = 8;
constexpr std::string_view kAnswers[] = {"0,2,0,1,0,2", "-1,-1,-1,-1,-1,-1"};
constexpr std::string_view kIgnored = "second answer, to be ignored";

HorovodRendezvousLimits small_limits() {
  HorovodRendezvousLimits limits;
  limits.max_header = 2048;
  limits.max_value = 64 * 1024;
  limits.max_keys = kMaxKeys;
  limits.max_total = 4096;
  limits.max_connections = 4;
  limits.request_timeout = 200ms;
  return limits;
}

// A failed system call of the harness itself: not a finding of the server, but never to be hidden.
[[noreturn]] void harness_failed(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), "elastic_http harness: " + what);
}

// The client's socket, connected by the launcher's own `dial_tcp` (non-blocking, the handshake awaited
// with poll() under a deadline: libFuzzer's timer signal cuts a blocking connect() short with EINTR);
// closed with an RST (SO_LINGER 0) so that no run leaves a TIME_WAIT behind. On loopback the handshake
// needs the kernel alone, not the server's accept, so 5 s without it is a hang, not a slow machine.
class ClientSocket {
 public:
  explicit ClientSocket(std::uint16_t port) : fd_(connect_loopback(port)) {}
  ~ClientSocket() {
    const linger reset{1, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  }
  ClientSocket(const ClientSocket&) = delete;
  ClientSocket& operator=(const ClientSocket&) = delete;

  // Sends what the socket takes now of input[sent..]; at the end shuts the write side. A server that
  // already closed (EPIPE, ECONNRESET) ends the writing too.
  void pump_out(std::string_view input) {
    while (!write_done_) {
      if (sent_ == input.size()) {
        if (::shutdown(fd_.get(), SHUT_WR) != 0 && errno != ENOTCONN) harness_failed("shutdown(SHUT_WR)");
        write_done_ = true;
        return;
      }
      const ssize_t n = ::send(fd_.get(), input.data() + sent_, input.size() - sent_, MSG_NOSIGNAL);
      if (n > 0) {
        sent_ += static_cast<std::size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
        write_done_ = true;
      } else {
        harness_failed("send");
      }
    }
  }

  // Appends what the server wrote to `out`; true once the server closed (EOF or reset).
  bool pump_in(std::string& out) {
    char buf[16 * 1024];
    for (;;) {
      const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
      if (n > 0) {
        out.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0) {
        return true;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return false;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == ECONNRESET) {
        return true;
      } else {
        harness_failed("recv");
      }
    }
  }

 private:
  static UniqueFd connect_loopback(std::uint16_t port) {
    DialResult dialled = dial_tcp("127.0.0.1", port, 5s);
    if (dialled.failure != DialFailure::kNone)
      throw std::runtime_error("elastic_http harness: connect to 127.0.0.1:" + std::to_string(port) + ": " +
                               (dialled.detail.empty() ? "no handshake in 5 s" : dialled.detail));
    return std::move(dialled.fd);
  }

  UniqueFd fd_;
  std::size_t sent_ = 0;
  bool write_done_ = false;
};

// What the hooks were given during one input.
struct Seen {
  std::size_t rank_and_size_calls = 0;
  std::function<void(std::string)> held;
  bool holding = false;
  std::vector<HorovodWorkerAddresses> registered;
};

HorovodElasticHooks hooks_into(Seen& seen) {
  HorovodElasticHooks hooks;
  hooks.rank_and_size = [&seen](const std::string& host, int local_rank, std::function<void(std::string)> answer) {
    expect(!host.empty(), "rank_and_size hook called with an empty host");
    expect(local_rank >= 0, "rank_and_size hook called with local rank " + std::to_string(local_rank));
    expect(!seen.holding, "rank_and_size hook called again on a connection whose request is held");
    const std::size_t turn = seen.rank_and_size_calls++ % 3;
    if (turn < 2) {
      answer(std::string(kAnswers[turn]));
      answer(std::string(kIgnored));  // only the first call counts
    } else {
      seen.held = std::move(answer);
      seen.holding = true;
    }
  };
  hooks.worker_addresses = [&seen](const std::string& host, int local_rank, HorovodWorkerAddresses a) {
    expect(!host.empty(), "worker_addresses hook called with an empty host");
    expect(local_rank >= 0, "worker_addresses hook called with local rank " + std::to_string(local_rank));
    expect(a.key.size() == kHorovodSecretSize, "worker addresses handed on with a key of another size");
    for (const auto& [nic, addresses] : a.by_nic)
      for (const auto& address : addresses)
        expect(address.port >= 1 && address.port <= 65535,
               "a worker address handed on with port " + std::to_string(address.port));
    seen.registered.push_back(std::move(a));
  };
  hooks.global_rank_published = [](int rank) {
    expect(rank >= 0, "global_rank_published hook called with rank " + std::to_string(rank));
  };
  return hooks;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Checks every answer in `out`, the bytes the server wrote on the connection. The last one may be cut
// short (the server reset the connection, or the run ended): its bytes are checked as far as they go.
void check_answers(std::string_view out, std::string_view input) {
  // 403: PUT /hvrun/knock from an allowed peer with a token not expected (a stranger's is closed unanswered).
  static constexpr int kStatuses[] = {200, 400, 403, 404, 405, 413, 431, 507};
  while (!out.empty()) {
    const std::string_view prefix = "HTTP/";
    expect(out.substr(0, prefix.size()) == prefix.substr(0, std::min(prefix.size(), out.size())),
           "an answer that does not start with HTTP/: " + std::string(out.substr(0, 40)));
    if (out.size() < 13) return;  // "HTTP/1.1 200" and the space after it not all there
    expect(is_digit(out[5]) && out[6] == '.' && is_digit(out[7]) && out[8] == ' ' && is_digit(out[9]) &&
               is_digit(out[10]) && is_digit(out[11]) && out[12] == ' ',
           "a malformed status line: " + std::string(out.substr(0, 40)));
    const std::string version(out.substr(0, 8));
    expect(version == "HTTP/1.1" || input.find(version) != std::string_view::npos,
           "an answer in " + version + ", which the input never named");
    const int status = (out[9] - '0') * 100 + (out[10] - '0') * 10 + (out[11] - '0');
    expect(std::find(std::begin(kStatuses), std::end(kStatuses), status) != std::end(kStatuses),
           "an answer with status " + std::to_string(status));
    const std::size_t end = out.find("\r\n\r\n");
    if (end == std::string_view::npos) return;
    const std::string_view head = out.substr(0, end + 2);
    const std::string_view field = "\r\nContent-Length: ";
    const std::size_t cl = head.find(field);
    expect(cl != std::string_view::npos, "an answer without Content-Length: " + std::string(head));
    std::size_t length = 0;
    std::size_t i = cl + field.size();
    expect(i < head.size() && is_digit(head[i]), "a Content-Length that is no number: " + std::string(head));
    for (; i < head.size() && is_digit(head[i]); ++i) length = length * 10 + static_cast<std::size_t>(head[i] - '0');
    expect(head.substr(i, 2) == "\r\n", "a Content-Length that is no number: " + std::string(head));
    const std::size_t whole = end + 4 + length;
    if (status == 200 && out.size() >= whole) {
      const std::string_view body = out.substr(end + 4, length);
      expect(body != kIgnored || input.find(kIgnored) != std::string_view::npos,
             "an answer of rank_and_size's second call was sent");
    }
    if (out.size() < whole) return;
    out.remove_prefix(whole);
  }
}

// Restores a logger's level: the server warns about every refused request, which a fuzzer must not
// print hundreds of times a second, and the regression test shares the loggers with other tests.
class QuietLog {
 public:
  explicit QuietLog(spdlog::logger& log) : log_(log), level_(log.level()) { log_.set_level(spdlog::level::off); }
  ~QuietLog() { log_.set_level(level_); }
  QuietLog(const QuietLog&) = delete;
  QuietLog& operator=(const QuietLog&) = delete;

 private:
  spdlog::logger& log_;
  LogLevel level_;
};

// Runs every handler that is ready, until none is.
void drain(boost::asio::io_context& io) {
  io.restart();
  while (io.poll() > 0) {
  }
}

}  // namespace

void elastic_http(std::string_view input) {
  static boost::asio::io_context io;
  const QuietLog quiet(log_of(LogSubsys::kRendezvous));
  drain(io);

  Seen seen;
  std::string out;
  {
    HorovodRendezvous server(io, HorovodRendezvousOptions{"127.0.0.1", 0, {"127.0.0.1"}, small_limits(), hooks_into(seen)});
    {
      ClientSocket client(server.port());
      const auto deadline = Clock::now() + 300ms;
      for (;;) {
        io.restart();
        io.poll();
        client.pump_out(input);
        const bool closed = client.pump_in(out);
        expect(server.key_count() <= kMaxKeys, "the server holds " + std::to_string(server.key_count()) +
                                                   " keys, over its bound of " + std::to_string(kMaxKeys));
        expect(server.connection_count() <= 1,
               "the server counts " + std::to_string(server.connection_count()) + " connections of our one");
        // A held request ends the connection's requests: every answer before it was written whole
        // before the server read it, so `out` has them all.
        if (closed || seen.holding || Clock::now() >= deadline) break;
        io.restart();
        io.run_one_for(1ms);
      }
    }
    server.close();
    expect(server.connection_count() == 0, "a connection left after close()");
    expect(server.key_count() == 0, "keys left after close()");
    if (seen.holding && input.size() % 2 == 1) seen.held("0,2,0,1,0,2");  // too late: does nothing
    seen.held = nullptr;
    drain(io);
    expect(server.connection_count() == 0 && server.key_count() == 0, "the server came back to life after close()");
  }
  drain(io);
  check_answers(out, input);
}

}  // namespace hvrun::fuzz
