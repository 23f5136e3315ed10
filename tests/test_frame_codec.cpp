#include <catch2/catch.hpp>

#include "common/control_message.hpp"
#include "common/error.hpp"
#include "common/frame_codec.hpp"

#include <nlohmann/json.hpp>

using namespace hvrun;

TEST_CASE("frames round-trip whole and byte by byte", "[wire]") {
  const std::string a = encode_frame(FrameType::kControl, R"({"type":"shutdown"})");
  const std::string b = encode_frame(FrameType::kOutput, std::string("\0\x01binary\xff", 9));
  const std::string e = encode_frame(FrameType::kOutput, "");
  const std::string stream = a + b + e;
  for (std::size_t step : {std::size_t{1}, std::size_t{5}, stream.size()}) {
    FrameDecoder d("peer");
    std::vector<Frame> got;
    for (std::size_t i = 0; i < stream.size(); i += step) {
      d.feed(std::string_view(stream).substr(i, step));
      while (auto f = d.next()) got.push_back(std::move(*f));
    }
    d.finish();
    REQUIRE(got.size() == 3);
    CHECK(got[0].type == FrameType::kControl);
    CHECK(got[0].payload == R"({"type":"shutdown"})");
    CHECK(got[1].type == FrameType::kOutput);
    CHECK(got[1].payload == std::string("\0\x01binary\xff", 9));
    CHECK(got[2].payload.empty());
  }
}

TEST_CASE("bad frames are errors that name the peer", "[wire]") {
  SECTION("garbage fails at the first wrong byte") {
    FrameDecoder d("agent on b");
    d.feed("GET ");
    REQUIRE_THROWS_WITH(d.next(), Catch::Contains("agent on b") && Catch::Contains("magic"));
  }
  SECTION("oversized length") {
    std::string f = encode_frame(FrameType::kControl, "x");
    f[8] = '\x7f';
    FrameDecoder d("agent on b");
    d.feed(f);
    REQUIRE_THROWS_WITH(d.next(), Catch::Contains("agent on b") && Catch::Contains("exceeds"));
  }
  SECTION("wrong version") {
    std::string f = encode_frame(FrameType::kControl, "x");
    f[4] = 9;
    FrameDecoder d("p");
    d.feed(f);
    REQUIRE_THROWS_WITH(d.next(), Catch::Contains("wire version 9"));
  }
  SECTION("unknown type") {
    std::string f = encode_frame(FrameType::kControl, "x");
    f[5] = 7;
    FrameDecoder d("p");
    d.feed(f);
    REQUIRE_THROWS_AS(d.next(), ProtocolError);
  }
  SECTION("truncated at end of stream") {
    std::string f = encode_frame(FrameType::kControl, "hello");
    FrameDecoder d("agent on c");
    d.feed(f.substr(0, f.size() - 1));
    CHECK_FALSE(d.next());
    REQUIRE_THROWS_WITH(d.finish(), Catch::Contains("agent on c") && Catch::Contains("truncated"));
  }
  SECTION("encoding refuses an oversized payload") {
    REQUIRE_THROWS_AS(encode_frame(FrameType::kOutput, std::string(kMaxFramePayload + 1, 'x')), ProtocolError);
  }
}

TEST_CASE("control messages round-trip and reject malformed input", "[wire]") {
  LaunchMsg launch{"/tmp", {"sh", "-c", "true"}, {{"PATH", "/bin"}}, {{3, {{"HVRUN_RANK", "3"}}}}};
  const auto decoded = decode_control(encode_control(launch), "p");
  const auto& l = std::get<LaunchMsg>(decoded);
  CHECK(l.argv == launch.argv);
  CHECK(l.ranks.at(0).rank == 3);
  CHECK(l.ranks.at(0).env.at("HVRUN_RANK") == "3");
  CHECK(std::holds_alternative<ShutdownMsg>(decode_control(encode_control(ShutdownMsg{}), "p")));
  const auto ex = std::get<ExitedMsg>(decode_control(encode_control(ExitedMsg{2, 139, 11, "", "", 0}), "p"));
  CHECK(ex.signal == 11);
  FingerprintMsg print;
  print.script = "/w/caf\xe9.py";  // a path is bytes, not always UTF-8
  print.packages = {{"torch", "1.13.0a0+gitunknown"}};
  print.gpus = 8;
  const auto back = std::get<FingerprintMsg>(decode_control(encode_control(print), "p"));
  CHECK(back.script == print.script);
  CHECK(back.packages == print.packages);
  CHECK(back.gpus == 8);
  const auto req = std::get<FingerprintRequestMsg>(
      decode_control(encode_control(FingerprintRequestMsg{{"python3", "x.py"}, "/w", {{"PATH", "/bin"}}}), "p"));
  CHECK(req.env.at("PATH") == "/bin");
  const auto check = std::get<SyncCheckMsg>(
      decode_control(encode_control(SyncCheckMsg{{{"/w/caf\xe9.py", "5000000000", "ab"}}}), "p"));
  REQUIRE(check.files.size() == 1);
  CHECK(check.files[0].path == "/w/caf\xe9.py");
  CHECK(check.files[0].size == "5000000000");  // beyond int: text
  CHECK(std::get<SyncNeedMsg>(decode_control(encode_control(SyncNeedMsg{{0, 3}}), "p")).need == std::vector<int>{0, 3});
  const auto restart = std::get<RestartMsg>(decode_control(encode_control(RestartMsg{2, true}), "p"));
  CHECK(restart.attempt == 2);
  CHECK(restart.serve_store);
  const auto restarted = std::get<RestartReadyMsg>(decode_control(encode_control(RestartReadyMsg{4000, 4001}), "p"));
  CHECK(restarted.free_port == 4000);
  CHECK(restarted.store_port == 4001);
  const auto knock = std::get<KnockMsg>(decode_control(encode_control(KnockMsg{"10.0.0.1", 4002, "ab12", 5000}), "p"));
  CHECK(knock.address == "10.0.0.1");
  CHECK(knock.port == 4002);
  CHECK(knock.token == "ab12");
  CHECK(knock.timeout_ms == 5000);
  const auto knocked = std::get<KnockResultMsg>(decode_control(encode_control(KnockResultMsg{false, 12, "Connection refused"}), "p"));
  CHECK_FALSE(knocked.ok);
  CHECK(knocked.elapsed_ms == 12);
  CHECK(knocked.detail == "Connection refused");
  const auto notice = std::get<NoticeMsg>(decode_control(encode_control(NoticeMsg{"refused 2,997 connections"}), "p"));
  const auto seen = std::get<hvrun::ObservationMsg>(decode_control(
      encode_control(hvrun::ObservationMsg{2000, {{3, 250, 740, 5, 5, 250, 1500, 20480, 0, "", 0, "", -1, 0}, {4, 200, 0, 790, 10, 0, 400, 10240, 4800, "10.0.0.3", 900000, "10.0.0.4", 55, 2048}}}), "p"));
  CHECK(seen.window_ms == 2000);
  REQUIRE(seen.ranks.size() == 2);
  CHECK((seen.ranks[0].rank == 3 && seen.ranks[0].busy == 250 && seen.ranks[0].starved == 740 &&
         seen.ranks[0].waiting == 5 && seen.ranks[0].own_data == 5 && seen.ranks[0].cpu_limit == 250));
  CHECK((seen.ranks[0].cpu_ms == 1500 && seen.ranks[0].rss_kb == 20480 && seen.ranks[0].send_peer.empty()));
  CHECK((seen.ranks[1].send_rate_kbs == 4800 && seen.ranks[1].send_peer == "10.0.0.3" && seen.ranks[1].fast_rate_kbs == 900000 && seen.ranks[1].fast_peer == "10.0.0.4"));
  CHECK((seen.ranks[1].rank == 4 && seen.ranks[1].waiting == 790));
  CHECK(notice.text == "refused 2,997 connections");

  for (const char* bad : {"", "{", "[]", R"({"type":7})", R"({"type":"nope"})", R"({"type":"exited","rank":"x"})",
                          R"({"type":"hello"})"}) {
    INFO(bad);
    REQUIRE_THROWS_WITH(decode_control(bad, "agent on d"), Catch::Contains("agent on d"));
  }
}

TEST_CASE("control messages: a probe outcome travels as its word, and only a known word decodes", "[wire]") {
  const ProbeResultMsg sent{2, "eth0", "10.0.0.8", ProbeOutcome::kRefused, -1, 3, "Connection refused"};
  const std::string wire = encode_control(sent);
  CHECK(nlohmann::json::parse(wire).at("outcome") == "refused");
  const auto got = std::get<ProbeResultMsg>(decode_control(wire, "p"));
  CHECK(got.outcome == ProbeOutcome::kRefused);
  CHECK(got.detail == "Connection refused");
  CHECK(got.host == 2);
  CHECK(got.elapsed_ms == 3);
  const std::string result = R"({"type":"probe_result","host":1,"iface":"eth0","address":"10.0.0.8",)"
                             R"("answered_as":-1,"elapsed_ms":3,"detail":"",)";
  CHECK_THROWS_WITH(decode_control(result + R"("outcome":"lost"})", "agent on b"),
                    "agent on b: unknown probe outcome 'lost'");
  CHECK_THROWS_WITH(decode_control(result + R"("outcome":"OK"})", "agent on b"),
                    "agent on b: unknown probe outcome 'OK'");
  REQUIRE_THROWS_WITH(decode_control(result + R"("outcome":1})", "agent on b"),
                      Catch::Contains("agent on b: malformed control message"));
  REQUIRE_THROWS_WITH(decode_control(result.substr(0, result.size() - 1) + "}", "agent on b"),
                      Catch::Contains("agent on b: malformed control message"));
}

TEST_CASE("control messages: the job and launch messages carry no host names, and every field is required", "[wire]") {
  const std::string job = encode_control(JobMsg{std::string(64, '0'), 20000, 3, true});
  CHECK(nlohmann::json::parse(job) == nlohmann::json::parse(R"({"type":"job","secret":")" + std::string(64, '0') +
                                                            R"(","heartbeat_ms":20000,"host_index":3,"serve_store":true,"report_cpu":false,)"
                                                            R"("elastic":false,"observe":true})"));
  CHECK_FALSE(std::get<JobMsg>(decode_control(encode_control(JobMsg{"00", 1000, 0, false, false, false, false}), "l")).observe);
  const std::string launch = encode_control(LaunchMsg{"/tmp", {"true"}, {}, {}});
  CHECK_FALSE(nlohmann::json::parse(launch).contains("host"));
  // What an earlier launcher sent still decodes (unknown fields are ignored); a missing field does not.
  const auto old_job = std::get<JobMsg>(decode_control(
      R"({"type":"job","secret":"00","heartbeat_ms":1000,"host_index":1,"hostnames":["a","b"],"serve_store":false})",
      "launcher"));
  CHECK(old_job.host_index == 1);
  CHECK_FALSE(old_job.report_cpu);
  CHECK(old_job.observe);  // absent: the agent observes
  CHECK(old_job.mpi_marker.empty());
  // --mpi observed: the marker goes out, the ready comes back with the crash handler's paths; neither
  // field is sent without (the JSON above has none).
  JobMsg marked{"00", 1000, 0, false, false, false, true};
  marked.mpi_marker = "feedc0de";
  CHECK(std::get<JobMsg>(decode_control(encode_control(marked), "l")).mpi_marker == "feedc0de");
  const auto ready = std::get<ReadyMsg>(decode_control(encode_control(ReadyMsg{7, "/t/lib.so", "/t/stacks"}), "a"));
  CHECK(ready.store_port == 7);
  CHECK(ready.rank_library == "/t/lib.so");
  CHECK(ready.stack_dir == "/t/stacks");
  CHECK(nlohmann::json::parse(encode_control(ReadyMsg{7, "", ""})) == nlohmann::json::parse(R"({"type":"ready","store_port":7})"));
  CHECK(std::get<HeartbeatMsg>(decode_control(R"({"type":"heartbeat"})", "launcher")).cpu_ms == 0);
  REQUIRE_THROWS_WITH(decode_control(R"({"type":"job","secret":"00","heartbeat_ms":1000,"host_index":1})", "launcher"),
                      Catch::Contains("launcher: malformed control message"));
}

TEST_CASE("control messages: the hello names the control version; an earlier agent's hello decodes as version 1",
          "[wire]") {
  HelloMsg hello{"0.1.0", "a", 42, 29500, 40000, {}, "", "", "ns"};
  CHECK(hello.control_version == kControlVersion);
  const auto got = std::get<HelloMsg>(decode_control(encode_control(hello), "p"));
  CHECK(got.control_version == kControlVersion);
  const auto old = std::get<HelloMsg>(decode_control(
      R"({"type":"hello","version":"0.1.0","hostname":"a","pid":42,"free_port":29500,"probe_port":40000,)"
      R"("interfaces":[],"ssh_client_address":"","ssh_server_address":""})",
      "p"));
  CHECK(old.control_version == 1);
}

TEST_CASE("control messages carry bytes, not text: strings and keys that are not UTF-8 arrive exact", "[wire]") {
  const std::string latin1("caf\xe9", 4), lone("\xff", 1), nul_first("\0x", 2), overlong("\xc0\xaf", 2);
  LaunchMsg launch{"/tmp/" + latin1, {"printf", latin1, lone, "", "\xe2\x82\xac"}, {{"V" + latin1, lone}, {"PATH", "/bin"}},
                   {{3, {{"X", nul_first}, {nul_first, overlong}}}}};
  const std::string wire = encode_control(launch);
  CHECK(nlohmann::json::parse(wire).is_object());  // still JSON, valid UTF-8
  CHECK(wire.find("\"/bin\"") != std::string::npos);  // text stays text, readable in a trace
  const auto l = std::get<LaunchMsg>(decode_control(wire, "p"));
  CHECK(l.cwd == launch.cwd);
  CHECK(l.argv == launch.argv);
  CHECK(l.env == launch.env);
  CHECK(l.ranks.at(0).env == launch.ranks.at(0).env);
  const auto ex = std::get<ExitedMsg>(decode_control(encode_control(ExitedMsg{1, 127, 0, "cannot execute '" + latin1 + "'", "", 0}), "p"));
  CHECK(ex.error == "cannot execute '" + latin1 + "'");

  // A bytes form that is not base64 is the peer's error, named, like any malformed message.
  for (const char* bad : {R"({"type":"fatal","error":{"\u0000":"abc"}})", R"({"type":"fatal","error":{"\u0000":"ab!="}})",
                          R"({"type":"fatal","error":{"\u0000":5}})"}) {
    INFO(bad);
    REQUIRE_THROWS_WITH(decode_control(bad, "agent on f"), Catch::Contains("agent on f") && Catch::Contains("bytes"));
  }
}

TEST_CASE("control messages refuse numbers an int cannot hold", "[wire]") {
  // nlohmann would turn these into other ints, or into undefined behaviour (1e300).
  for (const char* bad : {R"({"type":"started","rank":1e300,"pid":1})", R"({"type":"started","rank":0,"pid":1.5})",
                          R"({"type":"started","rank":4294967297,"pid":1})",
                          R"({"type":"terminate","grace_ms":-2147483649})",
                          R"({"type":"probe_request","targets":[],"timeout_ms":1.0})"}) {
    INFO(bad);
    REQUIRE_THROWS_WITH(decode_control(bad, "agent on e"), Catch::Contains("agent on e") && Catch::Contains("int"));
  }
  const auto s = std::get<StartedMsg>(decode_control(R"({"type":"started","rank":2147483647,"pid":-2147483648})", "p"));
  CHECK(s.rank == 2147483647);
  CHECK(s.pid == -2147483647 - 1);
}

TEST_CASE("output chunks carry rank, stream and raw bytes", "[wire]") {
  const std::string bytes("a\0b\xfe", 4);
  const auto c = decode_output(encode_output(12, OutputStream::kStderr, bytes), "p");
  CHECK(c.rank == 12);
  CHECK(c.stream == OutputStream::kStderr);
  CHECK(c.bytes == bytes);
  REQUIRE_THROWS_AS(decode_output("abc", "p"), ProtocolError);
  REQUIRE_THROWS_AS(decode_output(std::string("\0\0\0\1\x09", 5), "p"), ProtocolError);
}
