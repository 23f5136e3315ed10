// The probe between agents (common/probe_message.hpp): round trips, the strict decoders, and the
// words of ProbeOutcome.
#include <catch2/catch.hpp>

#include <string>

#include "common/job_secret.hpp"
#include "common/probe_message.hpp"

using namespace hvrun;
using Catch::Matchers::Contains;

namespace {

std::string challenge_text(const std::string& rest) {
  return R"({"type":"probe_challenge","version":1)" + rest + "}";
}
const std::string kNonceHex = hex_encode(std::string(kProbeNonceSize, 'n'));
const std::string kMacHex = hex_encode(std::string(kProbeMacSize, 'm'));

std::string answer_text(const std::string& host, const std::string& extra = "") {
  return R"({"type":"probe_answer","version":1,"host":)" + host + R"(,"hostname":"node-a","mac":")" + kMacHex +
         "\"" + extra + "}";
}

}  // namespace

TEST_CASE("probe messages round-trip, binary hostnames included", "[probe_message]") {
  const ProbeChallenge c{std::string(kProbeNonceSize, '\0')};
  CHECK(decode_probe_challenge(encode_probe_challenge(c), "p") == c);
  const ProbeAnswer a{7, std::string("n\xff\x01", 3), std::string(kProbeMacSize, '\xab')};
  CHECK(decode_probe_answer(encode_probe_answer(a), "p") == a);
  CHECK(decode_probe_answer(answer_text("0"), "p").host == 0);
  CHECK(decode_probe_answer(answer_text("2147483647"), "p").host == 2147483647);
}

TEST_CASE("the probe decoders refuse anything but their exact message", "[probe_message]") {
  const auto refused = [](const std::string& text, const std::string& why) {
    INFO(text);
    CHECK_THROWS_WITH(decode_probe_challenge(text, "peer p"), Contains("peer p") && Contains(why));
  };
  refused("", "malformed probe message");
  refused("[1]", "not a JSON object");
  refused(R"({"nonce":")" + kNonceHex + "\"}", "not a probe_challenge message");
  refused(R"({"type":"probe_answer","version":1,"nonce":")" + kNonceHex + "\"}", "not a probe_challenge");
  refused(R"({"type":"probe_challenge","nonce":")" + kNonceHex + "\"}", "no integer \"version\"");
  refused(R"({"type":"probe_challenge","version":2,"nonce":")" + kNonceHex + "\"}",
          "version 2, expected 1; use the same hvrun version everywhere");
  refused(R"({"type":"probe_challenge","version":-1,"nonce":")" + kNonceHex + "\"}", "version -1");
  refused(challenge_text(""), "no field \"nonce\"");
  refused(challenge_text(R"(,"nonce":")" + kNonceHex + R"(","extra":1)"), "unknown field \"extra\"");
  refused(challenge_text(R"(,"nonce":7)"), "\"nonce\" is not a string");
  refused(challenge_text(R"(,"nonce":")" + kNonceHex.substr(2) + "\""), "\"nonce\" is not 32 bytes in hex");
  refused(challenge_text(R"(,"nonce":")" + std::string(64, 'z') + "\""), "not a hex digit");

  const auto bad_answer = [](const std::string& text, const std::string& why) {
    INFO(text);
    CHECK_THROWS_WITH(decode_probe_answer(text, "peer q"), Contains("peer q: probe_answer") && Contains(why));
  };
  for (const char* host : {"-1", "2.5", "2147483648", "1e300", "\"1\"", "null"})
    bad_answer(answer_text(host), "is not a host index");
  bad_answer(R"({"type":"probe_answer","version":1,"host":1,"mac":")" + kMacHex + "\"}", "no field \"hostname\"");
  bad_answer(answer_text("1", R"(,"x":null)"), "unknown field \"x\"");
  bad_answer(R"({"type":"probe_answer","version":1,"host":1,"hostname":"a","mac":"00"})",
             "\"mac\" is not 32 bytes in hex");
}

TEST_CASE("probe outcomes have one word each, and back", "[probe_message]") {
  for (const ProbeOutcome o : {ProbeOutcome::kOk, ProbeOutcome::kRefused, ProbeOutcome::kTimeout,
                               ProbeOutcome::kUnreachable, ProbeOutcome::kWrongHost, ProbeOutcome::kAuthFailed}) {
    CHECK(probe_outcome_from_text(to_string(o)) == o);
    CHECK(parse_probe_outcome(to_string(o), "p") == o);
  }
  CHECK(std::string(to_string(ProbeOutcome::kWrongHost)) == "wrong-host");
  CHECK_FALSE(probe_outcome_from_text("OK"));
  CHECK_FALSE(probe_outcome_from_text(""));
  CHECK_THROWS_WITH(parse_probe_outcome("lost", "agent on b"), "agent on b: unknown probe outcome 'lost'");
}
