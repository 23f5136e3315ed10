#pragma once
// The probe between agents (docs/DESIGN.md §3.5) and the words for how a probe ended.
//
// A prober connects to a peer agent's probe port and sends one control frame holding a
// ProbeChallenge; the listener answers with one control frame holding a ProbeAnswer and closes. Each
// is one JSON object with "type" ("probe_challenge", "probe_answer") and "version" (kProbeVersion).
// The decoders are strict, since anything on the network may connect to a probe port: the object must
// have exactly its fields, each of its type, numbers an int holds, a nonce and a MAC of their exact
// sizes; anything else is a ProtocolError naming the peer. Fuzzed: tests/fuzz/fuzz_probe_message.cpp.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace hvrun {

// How one probe of one address ended. The order is the order of preference when a peer reached a NIC
// on several addresses (launcher/nic/nic_selector.cpp) and of the words in reports.
enum class ProbeOutcome {
  kOk,          // the right host answered with a valid HMAC
  kRefused,     // connection refused (RST): a firewall's REJECT, or nothing listening there
  kTimeout,     // no answer within the probe timeout: packets dropped
  kUnreachable, // no route, host or network unreachable
  kWrongHost,   // a valid answer from another host than the one probed (often the prober itself)
  kAuthFailed,  // an answer without a valid HMAC: another job or another program on that port
};

// "ok", "refused", "timeout", "unreachable", "wrong-host", "auth-failed": the words of ProbeResultMsg's
// `outcome` on the control channel and of every report.
const char* to_string(ProbeOutcome outcome);
// The outcome a word names; nothing for any other word.
std::optional<ProbeOutcome> probe_outcome_from_text(std::string_view word);
// The same, or ProtocolError "PEER: unknown probe outcome 'WORD'" for any other word.
ProbeOutcome parse_probe_outcome(std::string_view word, const std::string& peer);

// Raised when either message changes meaning; a peer of another version is refused, never misread.
inline constexpr int kProbeVersion = 1;
inline constexpr std::size_t kProbeNonceSize = 32;
inline constexpr std::size_t kProbeMacSize = 32;  // HMAC-SHA256 (JobSecret::kMacSize)

// prober → listener.
struct ProbeChallenge {
  std::string nonce;  // kProbeNonceSize random bytes, fresh per probe (hex on the wire)
  bool operator==(const ProbeChallenge&) const = default;
};

// listener → prober.
struct ProbeAnswer {
  int host = 0;          // the answering host's index in the job (JobMsg::host_index), >= 0
  std::string hostname;  // its local_hostname(), for messages
  std::string mac;       // kProbeMacSize bytes: HMAC(secret, probe_mac_input(nonce, host)) (hex on the wire)
  bool operator==(const ProbeAnswer&) const = default;
};

// The payload of the control frame that carries each message. Encoding never fails for a message
// that satisfies its field comments; decoding throws ProtocolError naming `peer`.
std::string encode_probe_challenge(const ProbeChallenge& msg);
ProbeChallenge decode_probe_challenge(std::string_view payload, const std::string& peer);
std::string encode_probe_answer(const ProbeAnswer& msg);
ProbeAnswer decode_probe_answer(std::string_view payload, const std::string& peer);

// The bytes the answer's HMAC covers: the nonce and the answering host's index, so that an answer
// cannot be replayed as another host's.
std::string probe_mac_input(const std::string& nonce, int host_index);

// The link test (docs/DESIGN.md §3.5): on the same port, a sender proves knowledge of the job's secret
// before the listener takes its bytes, and the listener proves it is the host the sender meant.
//   sender → listener: LinkHello (a fresh nonce)
//   listener → sender: LinkChallenge (its host index, a fresh nonce of its own, and
//                      HMAC(secret, link_listener_mac_input(hello nonce, host)))
//   sender → listener: LinkStart (HMAC(secret, link_sender_mac_input(challenge nonce))), then raw bytes
//                      up to its bound, then it shuts its side down (end of stream)
//   listener → sender: LinkCount (the raw bytes it received after LinkStart), and closes.
// Each MAC input begins with its own word ("hvrun-link-listener", "hvrun-link-sender", "hvrun-probe"), so
// no answer of one exchange passes for another's.
struct LinkHello {
  std::string nonce;  // kProbeNonceSize random bytes (hex on the wire)
  bool operator==(const LinkHello&) const = default;
};
struct LinkChallenge {
  int host = 0;       // the listener's host index, >= 0
  std::string nonce;  // kProbeNonceSize random bytes (hex on the wire)
  std::string mac;    // kProbeMacSize bytes (hex on the wire)
  bool operator==(const LinkChallenge&) const = default;
};
struct LinkStart {
  std::string mac;  // kProbeMacSize bytes (hex on the wire)
  bool operator==(const LinkStart&) const = default;
};
struct LinkCount {
  int bytes = 0;  // >= 0
  bool operator==(const LinkCount&) const = default;
};

std::string encode_link_hello(const LinkHello& msg);
LinkHello decode_link_hello(std::string_view payload, const std::string& peer);
std::string encode_link_challenge(const LinkChallenge& msg);
LinkChallenge decode_link_challenge(std::string_view payload, const std::string& peer);
std::string encode_link_start(const LinkStart& msg);
LinkStart decode_link_start(std::string_view payload, const std::string& peer);
std::string encode_link_count(const LinkCount& msg);
LinkCount decode_link_count(std::string_view payload, const std::string& peer);

std::string link_listener_mac_input(const std::string& hello_nonce, int host_index);
std::string link_sender_mac_input(const std::string& challenge_nonce);

}  // namespace hvrun
