#include "common/probe_message.hpp"

#include <climits>
#include <cstdint>
#include <initializer_list>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/job_secret.hpp"
#include "common/json_bytes.hpp"

namespace hvrun {

namespace {

constexpr ProbeOutcome kOutcomes[] = {ProbeOutcome::kOk,          ProbeOutcome::kRefused,
                                      ProbeOutcome::kTimeout,     ProbeOutcome::kUnreachable,
                                      ProbeOutcome::kWrongHost,   ProbeOutcome::kAuthFailed};

constexpr const char* kChallengeType = "probe_challenge";
constexpr const char* kAnswerType = "probe_answer";

// A JSON object of message `type` at kProbeVersion with exactly `fields` besides "type" and
// "version"; throws ProtocolError naming `peer` and what is wrong.
nlohmann::json parse_message(std::string_view payload, const std::string& peer, const char* type,
                             std::initializer_list<const char*> fields) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(payload);
    restore_bytes(j, peer);  // strings that are bytes, not UTF-8 (json_bytes.hpp)
  } catch (const nlohmann::json::exception& e) {
    throw ProtocolError(peer + ": malformed probe message: " + e.what());
  }
  const std::string what = peer + ": " + type + ": ";
  if (!j.is_object()) throw ProtocolError(peer + ": malformed probe message: not a JSON object");
  const auto t = j.find("type");
  if (t == j.end() || !t->is_string() || t->get<std::string>() != type)
    throw ProtocolError(what + "not a " + type + " message");
  const auto v = j.find("version");
  if (v == j.end() || !v->is_number_integer())
    throw ProtocolError(what + "no integer \"version\"");
  if (!v->is_number_unsigned() || v->get<std::uint64_t>() != static_cast<std::uint64_t>(kProbeVersion))
    throw ProtocolError(what + "version " + v->dump() + ", expected " + std::to_string(kProbeVersion) +
                        "; use the same hvrun version everywhere");
  for (const char* f : fields)
    if (!j.contains(f)) throw ProtocolError(what + "no field \"" + f + "\"");
  if (j.size() != fields.size() + 2) {
    for (const auto& [key, value] : j.items()) {
      bool known = key == "type" || key == "version";
      for (const char* f : fields) known = known || key == f;
      if (!known) throw ProtocolError(what + "unknown field \"" + key + "\"");
    }
  }
  return j;
}

std::string string_field(const nlohmann::json& j, const char* name, const std::string& what) {
  const nlohmann::json& v = j.at(name);
  if (!v.is_string()) throw ProtocolError(what + "\"" + name + "\" is not a string");
  return v.get<std::string>();
}

// Raw bytes from the hex of field `name`, exactly `size` of them.
std::string hex_field(const nlohmann::json& j, const char* name, std::size_t size, const std::string& what) {
  const std::string hex = string_field(j, name, what);
  if (hex.size() != 2 * size)
    throw ProtocolError(what + "\"" + name + "\" is not " + std::to_string(size) + " bytes in hex");
  try {
    return hex_decode(hex);
  } catch (const ProtocolError& e) {
    throw ProtocolError(what + "\"" + name + "\": " + e.what());
  }
}

// A non-negative int from field `name`, checked before any conversion: nlohmann turns 2.5 into 2 and
// 4294967297 into 1 silently.
int count_field(const nlohmann::json& j, const char* name, const std::string& what) {
  const nlohmann::json& v = j.at(name);
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT_MAX))
    throw ProtocolError(what + "\"" + name + "\" " + v.dump() + " is not a count");
  return static_cast<int>(v.get<std::uint64_t>());
}

std::string dump(nlohmann::json j, const char* type) {
  j["type"] = type;
  j["version"] = kProbeVersion;
  return dump_bytes_safe(j);
}

}  // namespace

const char* to_string(ProbeOutcome outcome) {
  switch (outcome) {
    case ProbeOutcome::kOk: return "ok";
    case ProbeOutcome::kRefused: return "refused";
    case ProbeOutcome::kTimeout: return "timeout";
    case ProbeOutcome::kUnreachable: return "unreachable";
    case ProbeOutcome::kWrongHost: return "wrong-host";
    case ProbeOutcome::kAuthFailed: return "auth-failed";
  }
  return "?";
}

std::optional<ProbeOutcome> probe_outcome_from_text(std::string_view word) {
  for (const ProbeOutcome o : kOutcomes)
    if (word == to_string(o)) return o;
  return std::nullopt;
}

ProbeOutcome parse_probe_outcome(std::string_view word, const std::string& peer) {
  if (const auto o = probe_outcome_from_text(word)) return *o;
  throw ProtocolError(peer + ": unknown probe outcome '" + std::string(word) + "'");
}

std::string encode_probe_challenge(const ProbeChallenge& msg) {
  return dump(nlohmann::json{{"nonce", hex_encode(msg.nonce)}}, kChallengeType);
}

ProbeChallenge decode_probe_challenge(std::string_view payload, const std::string& peer) {
  const nlohmann::json j = parse_message(payload, peer, kChallengeType, {"nonce"});
  return ProbeChallenge{hex_field(j, "nonce", kProbeNonceSize, peer + ": " + kChallengeType + ": ")};
}

std::string encode_probe_answer(const ProbeAnswer& msg) {
  return dump(nlohmann::json{{"host", msg.host}, {"hostname", msg.hostname}, {"mac", hex_encode(msg.mac)}},
              kAnswerType);
}

ProbeAnswer decode_probe_answer(std::string_view payload, const std::string& peer) {
  const nlohmann::json j = parse_message(payload, peer, kAnswerType, {"host", "hostname", "mac"});
  const std::string what = peer + ": " + kAnswerType + ": ";
  ProbeAnswer m;
  // Checked before any conversion: nlohmann turns 2.5 into 2 and 4294967297 into 1 silently.
  const nlohmann::json& host = j.at("host");
  if (!host.is_number_unsigned() || host.get<std::uint64_t>() > static_cast<std::uint64_t>(INT_MAX))
    throw ProtocolError(what + "\"host\" " + host.dump() + " is not a host index");
  m.host = static_cast<int>(host.get<std::uint64_t>());
  m.hostname = string_field(j, "hostname", what);
  m.mac = hex_field(j, "mac", kProbeMacSize, what);
  return m;
}

std::string probe_mac_input(const std::string& nonce, int host_index) {
  return "hvrun-probe|" + nonce + "|" + std::to_string(host_index);
}

namespace {
constexpr const char* kLinkHelloType = "link_hello";
constexpr const char* kLinkChallengeType = "link_challenge";
constexpr const char* kLinkStartType = "link_start";
constexpr const char* kLinkCountType = "link_count";
}  // namespace

std::string encode_link_hello(const LinkHello& msg) {
  return dump(nlohmann::json{{"nonce", hex_encode(msg.nonce)}}, kLinkHelloType);
}

LinkHello decode_link_hello(std::string_view payload, const std::string& peer) {
  const nlohmann::json j = parse_message(payload, peer, kLinkHelloType, {"nonce"});
  return LinkHello{hex_field(j, "nonce", kProbeNonceSize, peer + ": " + kLinkHelloType + ": ")};
}

std::string encode_link_challenge(const LinkChallenge& msg) {
  return dump(nlohmann::json{{"host", msg.host}, {"nonce", hex_encode(msg.nonce)}, {"mac", hex_encode(msg.mac)}},
              kLinkChallengeType);
}

LinkChallenge decode_link_challenge(std::string_view payload, const std::string& peer) {
  const nlohmann::json j = parse_message(payload, peer, kLinkChallengeType, {"host", "nonce", "mac"});
  const std::string what = peer + ": " + kLinkChallengeType + ": ";
  return LinkChallenge{count_field(j, "host", what), hex_field(j, "nonce", kProbeNonceSize, what),
                       hex_field(j, "mac", kProbeMacSize, what)};
}

std::string encode_link_start(const LinkStart& msg) {
  return dump(nlohmann::json{{"mac", hex_encode(msg.mac)}}, kLinkStartType);
}

LinkStart decode_link_start(std::string_view payload, const std::string& peer) {
  const nlohmann::json j = parse_message(payload, peer, kLinkStartType, {"mac"});
  return LinkStart{hex_field(j, "mac", kProbeMacSize, peer + ": " + kLinkStartType + ": ")};
}

std::string encode_link_count(const LinkCount& msg) { return dump(nlohmann::json{{"bytes", msg.bytes}}, kLinkCountType); }

LinkCount decode_link_count(std::string_view payload, const std::string& peer) {
  const nlohmann::json j = parse_message(payload, peer, kLinkCountType, {"bytes"});
  return LinkCount{count_field(j, "bytes", peer + ": " + kLinkCountType + ": ")};
}

std::string link_listener_mac_input(const std::string& hello_nonce, int host_index) {
  return "hvrun-link-listener|" + hello_nonce + "|" + std::to_string(host_index);
}

std::string link_sender_mac_input(const std::string& challenge_nonce) {
  return "hvrun-link-sender|" + challenge_nonce;
}

}  // namespace hvrun
