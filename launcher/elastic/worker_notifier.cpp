#include "launcher/elastic/worker_notifier.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <deque>
#include <optional>
#include <vector>

#include "common/duration_text.hpp"
#include "common/error.hpp"

namespace hvrun {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Address = HorovodWorkerAddresses::Address;

namespace {

std::string text(const Address& a) { return a.ip + ":" + std::to_string(a.port); }

// One request and its reply on a fresh connection, as Horovod's BasicClient sends each.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  using Reply = std::function<void(std::optional<HorovodReply>, const std::string& why)>;
  Exchange(asio::io_context& io, std::string key, Address to, std::string request, Reply on_reply)
      : socket_(io), key_(std::move(key)), to_(std::move(to)), sealed_(std::move(request)), on_reply_(std::move(on_reply)) {}

  void start() {
    boost::system::error_code ec;
    const auto ip = asio::ip::make_address(to_.ip, ec);
    if (ec) return finish(std::nullopt, "not an address");
    sealed_ = seal_horovod_message(key_, sealed_);
    socket_.async_connect(tcp::endpoint(ip, static_cast<unsigned short>(to_.port)), [self = shared_from_this()](auto e) {
      if (e) return self->finish(std::nullopt, e == asio::error::connection_refused ? "refused" : e.message());
      asio::async_write(self->socket_, asio::buffer(self->sealed_), [self](auto e2, std::size_t) {
        if (e2) return self->finish(std::nullopt, "closed while hvrun wrote: " + e2.message());
        self->read_header();
      });
    });
  }

  // Ends the exchange without a reply (the notice is over).
  void cancel() {
    done_ = true;
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

 private:
  void read_header() {
    message_.resize(kHorovodHeaderSize);
    asio::async_read(socket_, asio::buffer(message_), [self = shared_from_this()](auto e, std::size_t) {
      // Horovod's service drops a message whose digest is wrong without a word.
      if (e) return self->finish(std::nullopt, "closed without an answer (a wrong key, or not Horovod's service)");
      try {
        const std::size_t n = horovod_body_size(self->message_, text(self->to_));
        self->message_.resize(kHorovodHeaderSize + n);
        asio::async_read(self->socket_, asio::buffer(self->message_.data() + kHorovodHeaderSize, n),
                         [self](auto e2, std::size_t) {
                           if (e2) return self->finish(std::nullopt, "closed in its answer: " + e2.message());
                           try {
                             const std::string peer = text(self->to_);
                             self->finish(unpickle_reply(open_horovod_message(self->key_, self->message_, peer), peer), "");
                           } catch (const ProtocolError& p) {
                             self->finish(std::nullopt, p.what());
                           }
                         });
      } catch (const ProtocolError& p) {
        self->finish(std::nullopt, p.what());
      }
    });
  }

  void finish(std::optional<HorovodReply> reply, const std::string& why) {
    if (done_) return;
    done_ = true;
    boost::system::error_code ignored;
    socket_.close(ignored);
    on_reply_(std::move(reply), why);
  }

  tcp::socket socket_;
  std::string key_;
  Address to_;
  std::string sealed_;
  std::string message_;
  Reply on_reply_;
  bool done_ = false;
};

class Notice : public std::enable_shared_from_this<Notice> {
 public:
  Notice(asio::io_context& io, HorovodWorkerAddresses worker, long long timestamp, HorovodHostUpdate res,
         WorkerNotifier::Done done)
      : io_(io), timer_(io), worker_(std::move(worker)), update_(pickle_hosts_updated(timestamp, res)), done_(std::move(done)) {}

  void start(std::chrono::milliseconds timeout) {
    timer_.expires_after(timeout);
    timer_.async_wait([self = shared_from_this(), timeout](auto ec) {
      if (!ec) self->finish(WorkerNotice{false, {}, {}, self->why("no answer within " + seconds_text(timeout))});
    });
    starting_ = true;  // a ping that fails at once must not end the notice before the others are sent
    for (const auto& [nic, addresses] : worker_.by_nic)
      for (const Address& a : addresses) {
        ++pings_;
        // Weak: an exchange must not keep its notice alive (the notice holds its exchanges); the timer's
        // handler does, until the notice is over or its io_context is gone.
        send(a, pickle_ping_request(), [weak = weak_from_this(), a](std::optional<HorovodReply> r, const std::string& why) {
          const auto self = weak.lock();
          if (!self) return;
          --self->pings_;
          const auto* ping = r ? std::get_if<HorovodPingResponse>(&*r) : nullptr;
          if (ping && ping->service_name == kWorkerNotificationService)
            self->answered_.emplace_back(a, ping->source_address);
          else
            self->note(a, ping ? "is " + ping->service_name + ", not the worker notification service"
                               : r ? "answered a ping with an ack" : why);
          self->next();
        });
      }
    starting_ = false;
    next();
  }

 private:
  void send(const Address& to, std::string request, Exchange::Reply on_reply) {
    auto e = std::make_shared<Exchange>(io_, worker_.key, to, std::move(request), std::move(on_reply));
    live_.push_back(e);
    e->start();
  }

  // The update to the next address that answered a ping, once none is in flight.
  void next() {
    if (over_ || updating_ || starting_) return;
    if (answered_.empty()) {
      if (pings_ == 0) finish(WorkerNotice{false, {}, {}, why("")});
      return;
    }
    updating_ = true;
    // Plain names, not a structured binding: clang 14 cannot capture those.
    const Address to = answered_.front().first;
    const std::string source = answered_.front().second;
    answered_.pop_front();
    send(to, update_, [weak = weak_from_this(), to, source](std::optional<HorovodReply> r, const std::string& why) {
      const auto self = weak.lock();
      if (!self) return;
      self->updating_ = false;
      if (r && std::holds_alternative<HorovodAck>(*r))
        return self->finish(WorkerNotice{true, text(to), source, {}});
      self->note(to, r ? "answered the update with a ping response" : why);
      self->next();
    });
  }

  void note(const Address& a, const std::string& what) { notes_ += (notes_.empty() ? "" : "; ") + text(a) + " " + what; }
  std::string why(const std::string& last) const {
    if (notes_.empty()) return last.empty() ? "the worker published no address" : last;
    return last.empty() ? notes_ : notes_ + "; " + last;
  }

  void finish(WorkerNotice n) {
    if (over_) return;
    over_ = true;
    timer_.cancel();
    for (auto& e : live_) e->cancel();
    live_.clear();
    done_(std::move(n));
  }

  asio::io_context& io_;
  asio::steady_timer timer_;
  HorovodWorkerAddresses worker_;
  std::string update_;
  WorkerNotifier::Done done_;
  std::vector<std::shared_ptr<Exchange>> live_;
  std::deque<std::pair<Address, std::string>> answered_;
  int pings_ = 0;
  bool updating_ = false;
  bool starting_ = false;
  bool over_ = false;
  std::string notes_;
};

}  // namespace

WorkerNotifier::WorkerNotifier(asio::io_context& io) : io_(io) {}
WorkerNotifier::~WorkerNotifier() = default;

void WorkerNotifier::notify(const HorovodWorkerAddresses& worker, long long timestamp, HorovodHostUpdate res,
                            std::chrono::milliseconds timeout, Done done) {
  std::make_shared<Notice>(io_, worker, timestamp, res, std::move(done))->start(timeout);
}

}  // namespace hvrun
