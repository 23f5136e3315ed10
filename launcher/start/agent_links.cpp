#include "launcher/start/agent_links.hpp"

#include <fcntl.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>

#include "common/duration_text.hpp"
#include "common/error.hpp"
#include "common/frame_channel.hpp"
#include "common/heartbeat.hpp"
#include "common/log.hpp"

namespace hvrun {

namespace asio = boost::asio;

struct AgentLinks::Impl {
  struct Link {
    std::string host;
    std::unique_ptr<FrameChannel> channel;
    std::unique_ptr<Watchdog> watchdog;
    bool closed = false;
    std::size_t to_ack = 0;  // output payload taken in and not yet acknowledged to the agent
  };

  Impl(asio::io_context& c, std::vector<std::string> hosts, std::chrono::milliseconds timeout, Events e)
      : io(c), heartbeat_timeout(timeout), events(std::move(e)), heartbeats(c, [this] {
          for (std::size_t i = 0; i < links.size(); ++i) send(i, HeartbeatMsg{});
        }) {
    for (auto& h : hosts) links.push_back(Link{std::move(h), nullptr, nullptr, false, 0});
  }

  bool live(std::size_t i) const { return links[i].channel && !links[i].closed; }

  void send(std::size_t i, const ControlMessage& msg) {
    if (live(i)) links[i].channel->send(FrameType::kControl, encode_control(msg));
  }

  // A host whose agent sends nothing for a heartbeat period is cut off or dead; its SSH connection
  // may still look open, so only silence tells.
  void on_silence(std::size_t i) {
    if (links[i].closed) return;
    links[i].channel->close();
    events.on_closed(i, "no answer for " + seconds_text(heartbeat_timeout) +
                            " (host down or network cut?); raise --heartbeat-timeout if it is only slow");
  }

  void send_ack(Link& l, std::size_t i) {
    if (live(i))
      l.channel->send(FrameType::kControl, encode_control(OutputAckMsg{static_cast<int>(l.to_ack)}));
    l.to_ack = 0;
  }

  asio::io_context& io;
  std::chrono::milliseconds heartbeat_timeout;
  Events events;
  std::vector<Link> links;
  HeartbeatSender heartbeats;
  bool congestion_noticed = false;
};

AgentLinks::AgentLinks(asio::io_context& io, std::vector<std::string> hosts,
                       std::chrono::milliseconds heartbeat_timeout, Events events)
    : impl_(std::make_unique<Impl>(io, std::move(hosts), heartbeat_timeout, std::move(events))) {}
AgentLinks::~AgentLinks() = default;

std::size_t AgentLinks::add(std::string host) {
  impl_->links.push_back(Impl::Link{std::move(host), nullptr, nullptr, false, 0});
  return impl_->links.size() - 1;
}

void AgentLinks::attach(std::size_t i, UniqueFd fd, const JobMsg& job) {
  Impl::Link& l = impl_->links.at(i);
  UniqueFd wfd(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3));
  if (!wfd) throw_errno("fcntl(F_DUPFD_CLOEXEC)", "channel to the agent on " + l.host);
  l.channel = std::make_unique<FrameChannel>(impl_->io, std::move(fd), std::move(wfd), "agent on " + l.host);
  l.watchdog = std::make_unique<Watchdog>(impl_->io, [this, i] { impl_->on_silence(i); });
  l.watchdog->set_period(impl_->heartbeat_timeout);
  l.channel->start({
      .on_frame =
          [this, i](Frame&& f) {
            impl_->links[i].watchdog->rearm();
            impl_->events.on_frame(i, std::move(f));
          },
      .on_closed = [this, i](const std::string& error) { impl_->events.on_closed(i, error); },
      .on_drained = {},
  });
  l.channel->send(FrameType::kControl, encode_control(job));
  l.watchdog->rearm();
}

void AgentLinks::start_heartbeats() { impl_->heartbeats.start(impl_->heartbeat_timeout); }

void AgentLinks::send(std::size_t i, const ControlMessage& msg) { impl_->send(i, msg); }

void AgentLinks::send_all(const ControlMessage& msg) {
  // Encoded once: a message to every host of a large job.
  const std::string payload = encode_control(msg);
  for (std::size_t i = 0; i < impl_->links.size(); ++i)
    if (impl_->live(i)) impl_->links[i].channel->send(FrameType::kControl, payload);
}

bool AgentLinks::live(std::size_t i) const { return impl_->live(i); }
bool AgentLinks::attached(std::size_t i) const { return impl_->links[i].channel != nullptr; }
bool AgentLinks::closed(std::size_t i) const { return impl_->links[i].closed; }

bool AgentLinks::all_closed() const {
  for (const auto& l : impl_->links)
    if (!l.closed) return false;
  return true;
}

void AgentLinks::mark_closed(std::size_t i) {
  Impl::Link& l = impl_->links[i];
  l.closed = true;
  if (l.watchdog) l.watchdog->cancel();
}

void AgentLinks::abandon_unattached() {
  for (auto& l : impl_->links)
    if (!l.channel) l.closed = true;
}

void AgentLinks::close_channel(std::size_t i) {
  if (impl_->links[i].channel) impl_->links[i].channel->close();
}

void AgentLinks::close_all() {
  for (auto& l : impl_->links) {
    if (l.channel) l.channel->close();
    if (l.watchdog) l.watchdog->cancel();
  }
  impl_->heartbeats.stop();
}

const std::string& AgentLinks::peer(std::size_t i) const { return impl_->links[i].channel->peer(); }

void AgentLinks::took_output(std::size_t i, std::size_t bytes, bool congested) {
  Impl::Link& l = impl_->links[i];
  l.to_ack += bytes;
  if (congested) {
    if (!impl_->congestion_noticed) {
      impl_->congestion_noticed = true;
      log_of(LogSubsys::kOutput).warn("ranks print faster than hvrun's output is read; they now wait on their "
                                      "writes (back-pressure): nothing is dropped");
    }
    return;
  }
  if (l.to_ack >= kOutputWindow / 4) impl_->send_ack(l, i);
}

void AgentLinks::acknowledge_all() {
  for (std::size_t i = 0; i < impl_->links.size(); ++i)
    if (impl_->links[i].to_ack > 0) impl_->send_ack(impl_->links[i], i);
}

}  // namespace hvrun
