// common/horovod_pickle.hpp: the pickles and the Wire framing of Horovod's worker notification
// service. The fixtures below are the exact bytes Horovod 0.28.1's cloudpickle wrote for each message
// (pickle protocol 5); the last case feeds hvrun's messages to Horovod's own WorkerNotificationService.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>

#include "common/horovod_pickle.hpp"
#include "common/job_secret.hpp"
#include "hvrun/error.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/horovod_site.hpp"
#include <functional>

using namespace hvrun;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using namespace std::string_literals;

// cloudpickle.dumps(network.PingResponse('worker notification service', '10.0.0.1'), protocol=5)
const std::string kPingResponse =
    "\x80\x05\x95\x88\x00\x00\x00\x00\x00\x00\x00\x8c\"horovod.runner.common.util.network\x94\x8c\x0cPingResponse"
    "\x94\x93\x94)\x81\x94}\x94(\x8c\x0cservice_name\x94\x8c\x1bworker notification service\x94\x8c\x0esource_"
    "address\x94\x8c\x08" "10.0.0.1\x94ub."s;
// cloudpickle.dumps(network.AckResponse(), protocol=5)
const std::string kAck =
    "\x80\x05\x95\x39\x00\x00\x00\x00\x00\x00\x00\x8c\"horovod.runner.common.util.network\x94\x8c\x0b"
    "AckResponse\x94\x93\x94)\x81\x94."s;
// cloudpickle.dumps(({'eth0': [('10.0.0.1', 1234)], 'lo': [('127.0.0.1', 1234)]}, b'\x01' * 32), protocol=5)
const std::string kAddresses =
    "\x80\x05\x95]\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x04" "eth0\x94]\x94\x8c\x08" "10.0.0.1\x94M\xd2\x04\x86\x94"
    "a\x8c\x02lo\x94]\x94\x8c\t127.0.0.1\x94M\xd2\x04\x86\x94" "auC \x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
    "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x94\x86\x94."s;

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const ProtocolError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string unhex(const std::string& hex) { return hex_decode(hex); }

}  // namespace

TEST_CASE("Horovod's pickled replies and worker addresses read as records", "[unit][horovod_pickle]") {
  CHECK(unpickle_reply(kPingResponse, "w") ==
        HorovodReply{HorovodPingResponse{"worker notification service", "10.0.0.1"}});
  CHECK(unpickle_reply(kAck, "w") == HorovodReply{HorovodAck{}});
  const HorovodWorkerAddresses a = unpickle_worker_addresses(kAddresses, "w");
  REQUIRE(a.by_nic.size() == 2);
  CHECK(a.by_nic[0].first == "eth0");
  CHECK(a.by_nic[0].second == std::vector<HorovodWorkerAddresses::Address>{{"10.0.0.1", 1234}});
  CHECK(a.by_nic[1].first == "lo");
  CHECK(a.by_nic[1].second == std::vector<HorovodWorkerAddresses::Address>{{"127.0.0.1", 1234}});
  CHECK(a.key == std::string(32, '\x01'));
}

TEST_CASE("a Horovod pickle that would run code, or is not what Horovod sends, is refused with where and why",
          "[unit][horovod_pickle]") {
  // pickle.dumps of os.system('id') at protocol 0: GLOBAL, MARK, a string, TUPLE, REDUCE.
  CHECK_THAT(refusal([] { unpickle_reply("cos\nsystem\n(S'id'\ntR.", "lab2:5000"); }),
             Catch::Equals("lab2:5000: a Horovod message hvrun refuses: opcode 0x63, which hvrun does not read at "
                           "byte 0"));
  // The same through STACK_GLOBAL, the way protocol 4 spells it.
  CHECK_THAT(refusal([] { unpickle_reply("\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x02id\x85R."s, "w"); }),
             Catch::Contains("a reference to os.system, which no Horovod message holds at byte 14"));
  // builtins.getattr, which Python's own pickle of an enum uses, is refused too: hvrun never receives one.
  CHECK_THAT(refusal([] { unpickle_reply("\x80\x04\x8c\x08" "builtins\x8c\x07getattr\x93."s, "w"); }),
             Catch::Contains("a reference to builtins.getattr"));
  CHECK_THAT(refusal([] { unpickle_reply(kPingResponse.substr(0, 60), "w"); }),
             Catch::Contains("the pickle ends 2 bytes short of its last opcode"));
  CHECK_THAT(refusal([] { unpickle_reply(kAck + "N", "w"); }), Catch::Contains("1 bytes after STOP"));
  CHECK_THAT(refusal([] { unpickle_reply("\x80\x04N.", "w"); }), Catch::Contains("the reply is a None, not a object"));
  CHECK_THAT(refusal([] { unpickle_reply(pickle_ping_request(), "w"); }),
             Catch::Contains("a horovod.runner.common.util.network.PingRequest, not a PingResponse"));
  // A list placed inside itself through the memo.
  CHECK_THAT(refusal([] { unpickle_worker_addresses("\x80\x04]\x94h\x00" "a."s, "w"); }),
             Catch::Contains("a second reference to a list at byte 4"));
  CHECK_THAT(refusal([] { unpickle_reply("\x80\x04}(\x8c\x01\xff" "N" "u."s, "w"); }),
             Catch::Contains("a str that is not UTF-8"));
  CHECK_THAT(refusal([] { unpickle_reply("\x80\x04}(NNu."s, "w"); }), Catch::Contains("a dict key that is a None"));
  CHECK_THAT(refusal([] { unpickle_reply("\x80\x04}(\x8c\x01kNu."s, "w"); }),
             Catch::Contains("the reply is a dict, not a object"));
  CHECK_THAT(refusal([] { unpickle_reply("\x80\x04(N."s, "w"); }), Catch::Contains("STOP with 1 values left"));
  CHECK_THAT(refusal([] { unpickle_reply("\x80\x04" "a."s, "w"); }), Catch::Contains("too few values"));
  CHECK_THAT(refusal([] { unpickle_reply("\x80\x04X\xff\xff\xff\x7f."s, "w"); }),
             Catch::Contains("a length of 2147483647 bytes"));
  std::string bad_port = kAddresses;
  bad_port.replace(bad_port.find("M\xd2\x04"), 3, "K\x00"s);  // BININT1 0
  CHECK_THAT(refusal([&] { unpickle_worker_addresses(bad_port, "w"); }), Catch::Contains("port 0 of eth0"));
  // Python would keep the last of two equal keys; hvrun refuses the message.
  std::string twice = kAddresses;
  twice.replace(twice.find("\x8c\x02lo"), 4, "\x8c\x04" "eth0"s);
  CHECK_THAT(refusal([&] { unpickle_worker_addresses(twice, "w"); }), Catch::Contains("the addresses of eth0 twice"));
  CHECK_THAT(refusal([] { unpickle_reply(std::string(kHorovodMaxMessage + 1, 'N'), "w"); }),
             Catch::Contains("a pickle of 65537 bytes, over hvrun's limit"));
  std::string short_key = kAddresses;
  short_key.replace(short_key.find("C "), 34, "C\x01\x01"s);
  CHECK_THAT(refusal([&] { unpickle_worker_addresses(short_key, "w"); }),
             Catch::Contains("a secret key of 1 bytes, not 32"));
}

TEST_CASE("Horovod's Wire framing: a digest under the worker's key, a length, the body", "[unit][horovod_pickle]") {
  const std::string key(32, 'k');
  const std::string sealed = seal_horovod_message(key, kAck);
  REQUIRE(sealed.size() == kHorovodHeaderSize + kAck.size());
  CHECK(sealed.substr(32, 4) == std::string{static_cast<char>(kAck.size()), 0, 0, 0});
  CHECK(horovod_body_size(sealed, "w") == kAck.size());
  CHECK(open_horovod_message(key, sealed, "w") == kAck);
  CHECK_THAT(refusal([&] { open_horovod_message(std::string(32, 'x'), sealed, "lab3:4000"); }),
             Catch::Equals("lab3:4000: a Horovod message whose digest does not match its body (another job's key?)"));
  CHECK_THAT(refusal([&] { open_horovod_message(key, sealed.substr(0, sealed.size() - 1), "w"); }),
             Catch::Contains("whose header says"));
  std::string negative = sealed;
  negative[35] = '\x80';
  CHECK_THAT(refusal([&] { horovod_body_size(negative, "w"); }), Catch::Contains("says it holds -"));
  CHECK_THAT(refusal([&] { horovod_body_size(sealed.substr(0, 10), "w"); }), Catch::Contains("36-byte header"));
  CHECK_THAT(refusal([] { decode_worker_addresses_put("abc", "w"); }), Catch::Contains("not base64"));
  CHECK_THAT(refusal([] { decode_worker_addresses_put("ab!=", "w"); }), Catch::Contains("not base64"));
}

TEST_CASE("Horovod 0.28.1's own WorkerNotificationService answers hvrun's ping and takes its hosts update",
          "[integration][horovod_pickle]") {
  const auto site = hvrun::test::horovod_site();
  if (!site) {
    WARN(hvrun::test::horovod_missing());
    return;
  }
  const std::string key = hex_decode(std::string(64, 'a'));
  const std::string ping = seal_horovod_message(key, pickle_ping_request());
  const std::string update = seal_horovod_message(key, pickle_hosts_updated(1764700000, HorovodHostUpdate::kAdded));
  const std::string forged = seal_horovod_message(std::string(32, 'z'), pickle_hosts_updated(1, HorovodHostUpdate::kRemoved));
  auto r = hvrun::test::run({hvrun::test::kDebianPython, hvrun::test::source_dir() + "/tests/horovod/notification_peer.py",
                             hex_encode(key), hex_encode(ping), hex_encode(update), hex_encode(forged)},
                            60s, {"PYTHONPATH=" + *site});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  std::string word, put, reply_ping, reply_update, reply_forged;
  lines >> word >> put;
  CHECK(word == "put");
  const HorovodWorkerAddresses a = decode_worker_addresses_put(put, "the worker");
  CHECK(a.key == key);
  bool loopback = false;
  for (const auto& [nic, addresses] : a.by_nic)
    for (const auto& address : addresses) loopback = loopback || (address.ip == "127.0.0.1" && address.port > 0);
  CHECK(loopback);

  lines >> word >> reply_ping >> word >> reply_update;
  CHECK(unpickle_reply(open_horovod_message(key, unhex(reply_ping), "w"), "w") ==
        HorovodReply{HorovodPingResponse{std::string(kWorkerNotificationService), "127.0.0.1"}});
  CHECK(unpickle_reply(open_horovod_message(key, unhex(reply_update), "w"), "w") == HorovodReply{HorovodAck{}});
  std::getline(lines, word);
  std::getline(lines, word);
  CHECK(word == "reply ");  // the forged update: the service checked its digest and answered nothing
  std::getline(lines, word);
  CHECK(word == "updated 1764700000 2 HostUpdateResult");  // and only the genuine one reached the manager
  CHECK_FALSE(std::getline(lines, word));
  CHECK_THAT(r.err, Catch::Contains("Security error: digest did not match the message"));
}
