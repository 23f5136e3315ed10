#include "collectives/rank_contract.hpp"

#include <charconv>
#include <cstdlib>

#include "common/error.hpp"
#include "common/rank_contract_names.hpp"

namespace hvrun {

namespace {

struct Variable {
  const char* name;
  bool required;
  const char* meaning;
};

// Every variable the collectives read, in one place (NCCL_PARAM's idea).
constexpr Variable kRank{rank_contract::kRank, true, "this rank, 0..HVRUN_SIZE-1"};
constexpr Variable kSize{rank_contract::kSize, true, "number of ranks"};
constexpr Variable kLocalRank{rank_contract::kLocalRank, true, "rank among this host's ranks"};
constexpr Variable kLocalSize{rank_contract::kLocalSize, true, "number of ranks on this host"};
constexpr Variable kIface{rank_contract::kIface, false, "NIC chosen for this host"};
constexpr Variable kAddr{rank_contract::kAddr, false, "this host's address on that NIC"};
constexpr Variable kHostname{rank_contract::kHostname, false, "this host's name, for messages"};
constexpr Variable kStoreAddr{rank_contract::kStoreAddr, true, "address of the job's rendezvous store"};
constexpr Variable kStorePort{rank_contract::kStorePort, true, "its port"};
constexpr Variable kStoreToken{rank_contract::kStoreToken, true, "the job's store token"};
constexpr Variable kTimeout{rank_contract::kCollectiveTimeout, false,
                            "seconds the rendezvous and each collective may take (default 300)"};

std::string missing_text(const Variable& v) {
  std::string text = std::string(v.name) + " is not set: run this program under hvrun";
  if (std::string_view(v.name).starts_with("HVRUN_STORE_"))
    text += " (one that serves the rendezvous store), or set HVRUN_STORE_ADDR, HVRUN_STORE_PORT and "
            "HVRUN_STORE_TOKEN to a running store";
  return text;
}

class Reader {
 public:
  explicit Reader(const EnvLookup& lookup) : lookup_(lookup) {}

  std::optional<std::string> text(const Variable& v) const {
    auto value = lookup_(v.name);
    if (value && value->empty()) value.reset();
    if (!value && v.required) throw UsageError(missing_text(v));
    return value;
  }

  std::optional<long long> integer(const Variable& v, long long min, long long max) const {
    const auto value = text(v);
    if (!value) return std::nullopt;
    long long n = 0;
    const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
    if (ec != std::errc() || end != value->data() + value->size() || n < min || n > max)
      throw UsageError(std::string(v.name) + "='" + *value + "' is not " + v.meaning + " (an integer from " +
                       std::to_string(min) + " to " + std::to_string(max) + ")");
    return n;
  }

 private:
  const EnvLookup& lookup_;
};

}  // namespace

CommunicatorOptions options_from_rank_contract(const EnvLookup& lookup_in) {
  const EnvLookup lookup = lookup_in ? lookup_in : [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const Reader env(lookup);
  CommunicatorOptions o;
  o.size = static_cast<int>(*env.integer(kSize, 1, 1 << 20));
  o.rank = static_cast<int>(*env.integer(kRank, 0, o.size - 1));
  o.local_size = static_cast<int>(*env.integer(kLocalSize, 1, o.size));
  o.local_rank = static_cast<int>(*env.integer(kLocalRank, 0, o.local_size - 1));
  o.iface = env.text(kIface).value_or("");
  o.address = env.text(kAddr).value_or("");
  o.hostname = env.text(kHostname).value_or("");
  o.store_host = *env.text(kStoreAddr);
  o.store_port = static_cast<std::uint16_t>(*env.integer(kStorePort, 1, 65535));
  o.store_token = *env.text(kStoreToken);
  if (const auto seconds = env.integer(kTimeout, 1, 7 * 24 * 3600)) o.timeout = std::chrono::seconds(*seconds);
  return o;
}

}  // namespace hvrun
