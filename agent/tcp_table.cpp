#include "agent/tcp_table.hpp"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <functional>
#include <vector>

#include "common/error.hpp"

namespace hvrun {

namespace {

using Clock = std::chrono::steady_clock;

// TCP_ESTABLISHED of the kernel's tcp_states.h (not in the UAPI headers; glibc's <netinet/tcp.h>, which
// has it, clashes with <linux/tcp.h>'s struct tcp_info).
constexpr unsigned kTcpEstablished = 1;
// One netlink datagram of a dump: the kernel fills up to about 32 KiB per receive.
constexpr std::size_t kReceiveBuffer = 64 * 1024;

std::string endpoint(int family, const __be32 (&address)[4], __be16 port) {
  char text[INET6_ADDRSTRLEN];
  if (::inet_ntop(family, address, text, sizeof text) == nullptr) throw_errno("inet_ntop", "a sock_diag address");
  const std::string port_text = std::to_string(ntohs(port));
  return family == AF_INET6 ? "[" + std::string(text) + "]:" + port_text : std::string(text) + ":" + port_text;
}

const char* family_name(int family) { return family == AF_INET6 ? "AF_INET6" : "AF_INET"; }

// Where tcp_info's busy, rwnd-limited and sndbuf-limited times end (Linux 4.10); an older kernel's
// shorter tcp_info lacks them.
constexpr std::size_t kLimitedTimesEnd = offsetof(tcp_info, tcpi_sndbuf_limited) + sizeof(tcp_info::tcpi_sndbuf_limited);

TcpConnection connection_of(int family, const inet_diag_msg& diag, const tcp_info& info, std::size_t length) {
  TcpConnection c;
  c.inode = diag.idiag_inode;
  c.local = endpoint(family, diag.id.idiag_src, diag.id.idiag_sport);
  c.peer = endpoint(family, diag.id.idiag_dst, diag.id.idiag_dport);
  c.bytes_acked = info.tcpi_bytes_acked;
  c.bytes_received = info.tcpi_bytes_received;
  c.delivery_rate = info.tcpi_delivery_rate;
  c.delivery_rate_app_limited = info.tcpi_delivery_rate_app_limited != 0;
  c.total_retrans = info.tcpi_total_retrans;
  c.rtt_us = info.tcpi_rtt;
  c.notsent_bytes = info.tcpi_notsent_bytes;
  c.unacked = info.tcpi_unacked;
  if (length >= kLimitedTimesEnd) {
    c.busy_time_us = info.tcpi_busy_time;
    c.rwnd_limited_us = info.tcpi_rwnd_limited;
    c.sndbuf_limited_us = info.tcpi_sndbuf_limited;
  }
  return c;
}

// One dump of `family`'s established TCP sockets with their tcp_info; `each` sees every socket. The
// kernel's messages are copied out of the buffer (they need not be aligned for C++'s rules).
void dump(int fd, int family, std::uint32_t sequence, Clock::time_point deadline,
          const std::function<void(const inet_diag_msg&, const tcp_info&, std::size_t)>& each) {
  struct {
    nlmsghdr header;
    inet_diag_req_v2 body;
  } request{};
  request.header.nlmsg_len = sizeof request;
  request.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  request.header.nlmsg_seq = sequence;
  request.body.sdiag_family = static_cast<__u8>(family);
  request.body.sdiag_protocol = IPPROTO_TCP;
  request.body.idiag_states = 1u << kTcpEstablished;
  request.body.idiag_ext = 1u << (INET_DIAG_INFO - 1);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  iovec out{&request, sizeof request};
  msghdr message{};
  message.msg_name = &kernel;
  message.msg_namelen = sizeof kernel;
  message.msg_iov = &out;
  message.msg_iovlen = 1;
  if (retry_eintr([&] { return ::sendmsg(fd, &message, 0); }) < 0)
    throw_errno("sendmsg", std::string("sock_diag dump request, ") + family_name(family));

  std::vector<unsigned char> buffer(kReceiveBuffer);
  for (;;) {
    if (Clock::now() > deadline)
      throw TimeoutError(std::string("sock_diag dump of ") + family_name(family) + " TCP sockets: not done within " +
                         std::to_string(TcpTable::kReadDeadline.count()) + " ms");
    iovec in{buffer.data(), buffer.size()};
    msghdr reply{};
    sockaddr_nl from{};
    reply.msg_name = &from;
    reply.msg_namelen = sizeof from;
    reply.msg_iov = &in;
    reply.msg_iovlen = 1;
    const ssize_t got = retry_eintr([&] { return ::recvmsg(fd, &reply, 0); });
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        throw TimeoutError(std::string("sock_diag dump of ") + family_name(family) + " TCP sockets: no answer within " +
                           std::to_string(TcpTable::kReceiveTimeout.count()) + " ms");
      throw_errno("recvmsg", std::string("sock_diag dump, ") + family_name(family));
    }
    if (got == 0) throw ProtocolError("sock_diag dump: the kernel's netlink socket ended the answer early");
    if (reply.msg_flags & MSG_TRUNC) throw ProtocolError("sock_diag dump: a datagram larger than the receive buffer");
    const auto size = static_cast<std::size_t>(got);
    for (std::size_t at = 0; size - at >= sizeof(nlmsghdr);) {
      nlmsghdr header;
      std::memcpy(&header, buffer.data() + at, sizeof header);
      if (header.nlmsg_len < sizeof header || header.nlmsg_len > size - at)
        throw ProtocolError("sock_diag dump: a message overruns the kernel's datagram");
      const unsigned char* payload = buffer.data() + at + NLMSG_HDRLEN;
      const std::size_t payload_size = header.nlmsg_len - NLMSG_HDRLEN;
      at += std::min<std::size_t>(NLMSG_ALIGN(header.nlmsg_len), size - at);
      if (header.nlmsg_seq != sequence) continue;  // the rest of an earlier dump that timed out
      if (header.nlmsg_type == NLMSG_DONE) return;
      if (header.nlmsg_type == NLMSG_ERROR) {
        nlmsgerr error;
        if (payload_size < sizeof error) throw ProtocolError("sock_diag dump: a short netlink error message");
        std::memcpy(&error, payload, sizeof error);
        if (error.error == 0) continue;  // an acknowledgement
        errno = -error.error;
        throw_errno("sock_diag dump", family_name(family));
      }
      if (header.nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
      inet_diag_msg diag;
      if (payload_size < sizeof diag) throw ProtocolError("sock_diag dump: a short inet_diag_msg");
      std::memcpy(&diag, payload, sizeof diag);
      tcp_info info{};
      std::size_t info_length = 0;
      for (std::size_t pos = NLMSG_ALIGN(sizeof diag); payload_size > pos && payload_size - pos >= sizeof(rtattr);) {
        rtattr attribute;
        std::memcpy(&attribute, payload + pos, sizeof attribute);
        if (attribute.rta_len < sizeof attribute || attribute.rta_len > payload_size - pos)
          throw ProtocolError("sock_diag dump: an attribute overruns its message");
        if (attribute.rta_type == INET_DIAG_INFO) {
          info_length = attribute.rta_len - RTA_LENGTH(0);
          std::memcpy(&info, payload + pos + RTA_LENGTH(0), std::min(info_length, sizeof info));
        }
        pos += RTA_ALIGN(attribute.rta_len);
      }
      each(diag, info, info_length);
    }
  }
}

}  // namespace

TcpTable::TcpTable() : netlink_(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)) {
  if (!netlink_) throw_errno("socket", "NETLINK_SOCK_DIAG for the ranks' TCP connections");
  const auto ms = kReceiveTimeout.count();
  timeval timeout{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
  if (::setsockopt(netlink_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0)
    throw_errno("setsockopt", "SO_RCVTIMEO on the NETLINK_SOCK_DIAG socket");
}

TcpTable::Connections TcpTable::read(const std::unordered_set<std::uint64_t>& inodes) {
  Connections out;
  if (inodes.empty()) return out;
  const auto deadline = Clock::now() + kReadDeadline;
  for (const int family : {AF_INET, AF_INET6}) {
    dump(netlink_.get(), family, ++sequence_, deadline, [&](const inet_diag_msg& diag, const tcp_info& info, std::size_t length) {
      if (inodes.count(diag.idiag_inode) != 0) out.insert_or_assign(diag.idiag_inode, connection_of(family, diag, info, length));
    });
  }
  return out;
}

}  // namespace hvrun
