#include "collectives/gloo_backend.hpp"

#include <arpa/inet.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "common/error.hpp"
#include "common/local_hostname.hpp"
#include "collectives/collectives_log.hpp"
#include "collectives/gloo_store.hpp"
#include "collectives/store_client.hpp"

namespace hvrun {

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, std::size_t);

// Gloo's element-wise reductions; the cast picks the (out, in1, in2, n) overload.
template <typename T>
ReduceFn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return static_cast<ReduceFn>(&gloo::sum<T>);
    case ReduceOp::kMin: return static_cast<ReduceFn>(&gloo::min<T>);
    case ReduceOp::kMax: return static_cast<ReduceFn>(&gloo::max<T>);
    case ReduceOp::kProduct: return static_cast<ReduceFn>(&gloo::product<T>);
  }
  throw CollectiveError("unknown reduction");
}

// Calls f(T{}) with the C++ type of `type`; half and bfloat16 are NCCL's only.
template <typename F>
void with_type(DataType type, const char* what, F&& f) {
  if (visit_host_type(type, std::forward<F>(f))) return;
  throw UsageError(std::string(what) + ": " + data_type_name(type) +
                   " is supported on GPU buffers (NCCL) only, not by the Gloo (CPU) path");
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

// hvrun probes each host's NICs from a few peers only (--probe-peers, docs/DESIGN.md §5.3), so a firewall
// between two hosts that never probed each other first shows when ranks connect: say how to test every pair.
constexpr const char* kCheckHint =
    "a firewall between two of these hosts? `hvrun --check-only` with this job's hosts probes every pair";

}  // namespace

struct GlooBackend::Impl {
  CommunicatorOptions options;
  StoreClient& store;
  std::string prefix;
  std::string iface;
  std::string description;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::uint32_t next_tag = 0;

  Impl(const CommunicatorOptions& o, StoreClient& s, std::string p) : options(o), store(s), prefix(std::move(p)) {
    if (options.hostname.empty()) options.hostname = local_hostname();
  }

  std::string where() const {
    return "rank " + std::to_string(options.rank) + " of " + std::to_string(options.size) + " on " + options.hostname +
           (iface.empty() ? "" : " (" + iface + ")");
  }

  void make_device() {
    gloo::transport::tcp::attr attr;
    // Same family as HVRUN_ADDR, so an IPv6 link-local address listed first on the NIC is not taken.
    unsigned char probe[sizeof(in6_addr)];
    if (::inet_pton(AF_INET, options.address.c_str(), probe) == 1) attr.ai_family = AF_INET;
    if (::inet_pton(AF_INET6, options.address.c_str(), probe) == 1) attr.ai_family = AF_INET6;
    if (!options.iface.empty()) {
      attr.iface = options.iface;
      try {
        device = gloo::transport::tcp::CreateDevice(attr);
        iface = options.iface;
        return;
      } catch (const std::exception& e) {
        if (options.address.empty())
          throw CollectiveError("hvrun collectives: Gloo cannot use NIC " + options.iface + " on " +
                                options.hostname + ": " + e.what());
        collectives_log().warn("Gloo cannot use NIC {} ({}); binding to {} instead", options.iface,
                     e.what(), options.address);
      }
    }
    attr.iface.clear();
    attr.hostname = options.address.empty() ? options.hostname : options.address;
    try {
      device = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      throw CollectiveError("hvrun collectives: Gloo cannot bind to " + attr.hostname + " on " + options.hostname +
                            ": " + e.what());
    }
  }

  void connect() {
    make_device();
    description = device->str();
    // Who is where, for error messages that name a peer by its address (see describe_peers).
    // "hostname address iface" (iface "-" when Gloo bound by address).
    store.set(prefix + "host/" + std::to_string(options.rank),
              options.hostname + " " + options.address + " " + (iface.empty() ? "-" : iface));
    GlooStore gloo_store(store, options.timeout);
    gloo::rendezvous::PrefixStore prefixed(prefix + "gloo", gloo_store);
    context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    context->setTimeout(options.timeout);
    try {
      context->connectFullMesh(prefixed, device);
    } catch (const Error& e) {
      throw CollectiveError("hvrun collectives: rendezvous of " + where() + " failed: " + e.what());
    } catch (const std::exception& e) {
      throw CollectiveError("hvrun collectives: " + where() + " could not connect to the other ranks: " + e.what() +
                            describe_peers(e.what()) + "; " + kCheckHint);
    }
    // For the others' error messages: this rank's connections are all up (see unconnected_ranks).
    store.set(prefix + "connected/" + std::to_string(options.rank), "1");
    collectives_log().debug("{} connected with Gloo on {}", where(), description);
  }

  // When Gloo's message holds a peer's address ("[10.0.0.2]:4711"), names that host and its ranks.
  std::string describe_peers(const std::string& message) const {
    // The first bracketed IP address; Gloo also brackets its source location ("[./gloo/...:598]").
    std::string ip;
    for (auto open = message.find('['); open != std::string::npos && ip.empty(); open = message.find('[', open + 1)) {
      const auto close = message.find(']', open);
      if (close == std::string::npos) break;
      const std::string inside = message.substr(open + 1, close - open - 1);
      if (!inside.empty() && inside.find_first_not_of("0123456789abcdefABCDEF:.") == std::string::npos &&
          inside.find_first_of(".:") != std::string::npos)
        ip = inside;
    }
    if (ip.empty()) return {};
    std::vector<int> all(static_cast<std::size_t>(options.size));
    for (int r = 0; r < options.size; ++r) all[static_cast<std::size_t>(r)] = r;
    std::map<std::string, std::vector<int>> ranks_by_host;  // "host NIC nic" -> ranks
    for (const auto& [r, entry] : host_entries(all))
      if (entry.address == ip) ranks_by_host[entry.where()].push_back(r);
    std::string out;
    for (const auto& [at, ranks] : ranks_by_host)
      out += "; " + ip + " is " + at + " (rank" + (ranks.size() > 1 ? "s " : " ") + ranks_text(ranks) + ")";
    return out;
  }

  // Where a rank runs, from its "host/RANK" entry.
  struct HostEntry {
    std::string host, address, nic;
    std::string where() const { return "host " + host + (nic == "-" || nic.empty() ? "" : " NIC " + nic); }
  };

  // The entries of `ranks` (ascending); empty when the store does not answer within 2 s.
  std::map<int, HostEntry> host_entries(const std::vector<int>& ranks) const {
    std::vector<std::string> keys;
    for (int r : ranks) keys.push_back(prefix + "host/" + std::to_string(r));
    std::map<int, HostEntry> out;
    try {
      const auto values = store.multi_get(keys, std::chrono::seconds(2));
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        std::istringstream fields(values[i]);
        HostEntry e;
        if (fields >> e.host >> e.address) {
          fields >> e.nic;
          out[ranks[i]] = e;
        }
      }
    } catch (const Error&) {
      return {};  // the store is gone too; Gloo's message stands alone
    }
    return out;
  }

  // When an operation fails and some ranks never finished connecting (a firewall between two hosts
  // that hvrun's bounded probes did not test leaves both stuck in Gloo's connect, and their peers
  // waiting in the first operation), names those ranks' hosts and NICs: "; ranks 1-3 had not finished
  // connecting (host b NIC eth1, ...): a firewall between two of these hosts? ...". Empty otherwise.
  std::string unconnected_ranks() const {
    std::vector<int> missing;
    try {
      for (int r = 0; r < options.size; ++r)
        if (r != options.rank && !store.check({prefix + "connected/" + std::to_string(r)})) missing.push_back(r);
    } catch (const Error&) {
      return {};
    }
    if (missing.empty()) return {};
    constexpr std::size_t kNamed = 8;  // hosts named at most; a line, not a list of thousands
    std::vector<std::string> named;
    for (const auto& [r, entry] : host_entries(missing))
      if (named.size() < kNamed && std::find(named.begin(), named.end(), entry.where()) == named.end())
        named.push_back(entry.where());
    std::string hosts;
    for (const auto& n : named) hosts += (hosts.empty() ? "" : ", ") + n;
    return std::string("; rank") + (missing.size() > 1 ? "s " : " ") + ranks_text(missing) +
           (missing.size() > 1 ? " had" : " has") + " not finished connecting" +
           (hosts.empty() ? "" : " (" + hosts + (named.size() == kNamed ? ", ..." : "") + ")") + "; " + kCheckHint;
  }

  // Runs one Gloo call; Gloo's exceptions become CollectiveError naming the operation, us and the peer.
  template <typename F>
  void run(const std::string& what, F&& f) {
    try {
      f();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw CollectiveError("hvrun collectives: " + what + " failed on " + where() + ": " + e.what() +
                            describe_peers(e.what()) + unconnected_ranks());
    }
  }

  std::string op_text(const char* op, std::size_t count, DataType type) const {
    return std::string(op) + " of " + std::to_string(count) + " " + data_type_name(type);
  }
};

GlooBackend::GlooBackend(const CommunicatorOptions& options, StoreClient& store, const std::string& prefix)
    : impl_(std::make_unique<Impl>(options, store, prefix)) {
  impl_->connect();
}

GlooBackend::~GlooBackend() = default;

const std::string& GlooBackend::iface() const { return impl_->iface; }
const std::string& GlooBackend::description() const { return impl_->description; }

void GlooBackend::allreduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op) {
  const std::string what = impl_->op_text("allreduce", count, type) + " (" + reduce_op_name(op) + ")";
  with_type(type, what.c_str(), [&](auto zero) {
    using T = decltype(zero);
    const auto tag = impl_->next_tag++;
    if (count == 0) return;
    if (impl_->options.size == 1) {
      if (send != recv) std::memcpy(recv, send, count * sizeof(T));
      return;
    }
    impl_->run(what, [&] {
      gloo::AllreduceOptions opts(impl_->context);
      opts.setTag(tag);
      opts.setTimeout(impl_->options.timeout);
      // Gloo takes a non-const pointer for its input but only reads it.
      if (send != recv) opts.setInput(static_cast<T*>(const_cast<void*>(send)), count);
      opts.setOutput(static_cast<T*>(recv), count);
      opts.setReduceFunction(reduce_fn<T>(op));
      gloo::allreduce(opts);
    });
  });
}

void GlooBackend::broadcast(void* buffer, std::size_t count, DataType type, int root) {
  const std::string what = impl_->op_text("broadcast", count, type) + " from rank " + std::to_string(root);
  if (root < 0 || root >= impl_->options.size)
    throw CollectiveError("hvrun collectives: " + what + ": no such rank (size " +
                          std::to_string(impl_->options.size) + ")");
  with_type(type, what.c_str(), [&](auto zero) {
    using T = decltype(zero);
    const auto tag = impl_->next_tag++;
    if (count == 0 || impl_->options.size == 1) return;
    impl_->run(what, [&] {
      gloo::BroadcastOptions opts(impl_->context);
      opts.setTag(tag);
      opts.setTimeout(impl_->options.timeout);
      opts.setRoot(root);
      opts.setOutput(static_cast<T*>(buffer), count);
      gloo::broadcast(opts);
    });
  });
}

void GlooBackend::allgather(const void* send, void* recv, std::size_t count, DataType type) {
  const std::string what = impl_->op_text("allgather", count, type);
  with_type(type, what.c_str(), [&](auto zero) {
    using T = decltype(zero);
    const auto tag = impl_->next_tag++;
    if (count == 0) return;
    const auto rank = static_cast<std::size_t>(impl_->options.rank);
    T* own = static_cast<T*>(recv) + rank * count;
    if (impl_->options.size == 1) {
      if (send != own) std::memmove(own, send, count * sizeof(T));
      return;
    }
    impl_->run(what, [&] {
      gloo::AllgatherOptions opts(impl_->context);
      opts.setTag(tag);
      opts.setTimeout(impl_->options.timeout);
      if (send != own) opts.setInput(static_cast<T*>(const_cast<void*>(send)), count);
      opts.setOutput(static_cast<T*>(recv), count * static_cast<std::size_t>(impl_->options.size));
      gloo::allgather(opts);
    });
  });
}

void GlooBackend::barrier() {
  const auto tag = impl_->next_tag++;
  if (impl_->options.size == 1) return;
  impl_->run("barrier", [&] {
    gloo::BarrierOptions opts(impl_->context);
    opts.setTag(tag);
    opts.setTimeout(impl_->options.timeout);
    gloo::barrier(opts);
  });
}

}  // namespace hvrun
