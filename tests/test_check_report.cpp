#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "launcher/check/check_report.hpp"
#include "tests/support/nic_lab.hpp"

using hvrun::CheckInput;
using hvrun::CheckReport;
using namespace hvrun::test::trap_lab;
using Catch::Contains;
using nlohmann::json;
using Strings = std::vector<std::string>;

namespace {

// A check of the lab hosts: SSH to each unless named in `ssh_failed`, probes as the lab answers them
// (with `override`), selection as the launcher would make it.
// `edit` changes the probe results before the selection.
CheckInput lab_check(std::size_t count, const NicFilter& filter = {}, const hvrun::test::ProbeOverride& override = {},
                     const std::vector<std::size_t>& ssh_failed = {},
                     const std::function<void(std::vector<ProbeResult>&)>& edit = {}) {
  auto hosts = lab_hosts(count);
  const auto targets = hvrun::probe_targets(hosts, filter, false);
  auto results = lab_probe(hosts, targets, override);
  if (edit) edit(results);
  const auto selections = hvrun::select_nics(hosts, targets, results, filter, false);
  CheckInput in;
  in.probe_time = std::chrono::milliseconds(1012);
  in.filter = filter;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    hvrun::HostCheck h;
    h.host = hosts[i].host;
    if (std::find(ssh_failed.begin(), ssh_failed.end(), i) != ssh_failed.end()) {
      h.ssh_error = "ssh " + h.host + ": connection refused (port 2222)";
    } else {
      h.agent_version = "0.1.0";
      h.interfaces = hosts[i].interfaces;
      h.selection = selections[i];
    }
    in.hosts.push_back(std::move(h));
  }
  return in;
}

hvrun::test::ProbeOverride one_way_c_to_a() {
  return [](std::size_t from, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
    if (from == 2 && t.host == 0 && t.iface == "eth1") return ProbeOutcome::kTimeout;
    return std::nullopt;
  };
}

// Checks `doc` has exactly the documented shape (README, --json): every field with its type,
// null where required, hosts in the order of `hosts`.
void check_shape(const json& doc, const Strings& hosts) {
  REQUIRE(doc.is_object());
  REQUIRE(doc.at("ok").is_boolean());
  REQUIRE(doc.at("probe_ms").is_number_integer());
  REQUIRE(doc.at("hosts").is_array());
  REQUIRE(doc.at("hosts").size() == hosts.size());
  bool all_selected = true;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const json& h = doc["hosts"][i];
    CAPTURE(i);
    REQUIRE(h.is_object());
    CHECK(h.at("host") == hosts[i]);
    const json& ssh = h.at("ssh");
    REQUIRE(ssh.at("ok").is_boolean());
    if (ssh["ok"].get<bool>()) {
      CHECK(ssh.at("error").is_null());
    } else {
      CHECK(ssh.at("error").is_string());
      CHECK(h.at("interfaces") == json::array());
      CHECK(h.at("selected").is_null());
    }
    REQUIRE(h.at("interfaces").is_array());
    for (const json& nic : h["interfaces"]) {
      REQUIRE(nic.at("name").is_string());
      REQUIRE(nic.at("address").is_string());
      REQUIRE(nic.at("usable").is_boolean());
      if (nic["usable"].get<bool>()) {
        CHECK(nic.at("reason").is_null());
      } else {
        CHECK(nic.at("reason").is_string());
        CHECK_FALSE(nic["reason"].get<std::string>().empty());
      }
    }
    const json& sel = h.at("selected");
    if (sel.is_null()) {
      all_selected = false;
    } else {
      REQUIRE(sel.is_object());
      REQUIRE(sel.at("interface").is_string());
      REQUIRE(sel.at("address").is_string());
    }
  }
  CHECK(doc["ok"].get<bool>() == all_selected);
}

const json& interface_named(const json& host, const std::string& name) {
  for (const json& nic : host.at("interfaces"))
    if (nic.at("name") == name) return nic;
  FAIL("no interface " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("check report, all usable: text names every NIC, the peers' words, reasons and settings", "[check_report]") {
  const CheckReport report(lab_check(4));
  CHECK(report.all_usable());
  CHECK(report.exit_code() == 0);
  CHECK(report.why_unusable().empty());
  const std::string text = report.listing();
  CAPTURE(text);
  CHECK_THAT(text, Contains("hvrun --check-only: 4 hosts, probes took 1012 ms\n"));
  CHECK_THAT(text, Contains("\na: ssh ok, agent 0.1.0\n"));
  CHECK_THAT(text, Contains("\nd: ssh ok, agent 0.1.0\n"));
  // a's NICs: aligned columns, one word per peer, the verdict.
  CHECK_THAT(text, Contains("  eth1     10.77.0.10     b ok, c ok, d ok  -> selected\n"));
  CHECK_THAT(text, Contains("  docker0  172.17.0.1     b wrong-host, c wrong-host, d wrong-host  UNUSABLE\n"
                            "           answered as the prober itself (from b, c, d): "
                            "this address exists on every host\n"));
  CHECK_THAT(text, Contains("  wlp5s0   192.168.77.10  b unreachable, c unreachable, d unreachable  UNUSABLE\n"
                            "           no route from b, c, d\n"));
  CHECK_THAT(text, Contains("  eth9     10.88.0.10     b timeout, c timeout, d timeout  UNUSABLE\n"
                            "           no answer within 1 s from b, c, d: packets dropped?\n"));
  CHECK_THAT(text, Contains("  not considered: lo (loopback: reaches only its own host)\n"));
  CHECK_THAT(text, Contains("NIC per host:\n"
                            "  a  eth1 10.77.0.10 (the only usable NIC)\n"
                            "  b  enp6s0 10.77.0.11 (the only usable NIC)\n"
                            "  c  enp5s0 10.77.0.12 (the only usable NIC)\n"
                            "  d  ib0 10.77.0.13 (the only usable NIC)\n"));
  CHECK_THAT(text, Contains("settings that work for other tools:\n"
                            "  hvrun --network-interface =eth1,=enp6s0,=enp5s0,=ib0\n"
                            "  a: NCCL_SOCKET_IFNAME==eth1\n"
                            "  b: NCCL_SOCKET_IFNAME==enp6s0\n"
                            "  c: NCCL_SOCKET_IFNAME==enp5s0\n"
                            "  d: NCCL_SOCKET_IFNAME==ib0\n"
                            "  Open MPI: mpirun --mca btl_tcp_if_include 10.77.0.0/24 "
                            "--mca oob_tcp_if_include 10.77.0.0/24\n"));

  const auto s = report.settings();
  CHECK(s.network_interface == "--network-interface =eth1,=enp6s0,=enp5s0,=ib0");
  CHECK(s.nccl == std::vector<std::pair<std::string, std::string>>{
                      {"a", "=eth1"}, {"b", "=enp6s0"}, {"c", "=enp5s0"}, {"d", "=ib0"}});
  REQUIRE(s.shared_subnet);
  CHECK(s.shared_subnet->text() == "10.77.0.0/24");
}

TEST_CASE("check report: a failed probe's words from the prober follow its outcome", "[check_report]") {
  const CheckReport report(lab_check(3, {}, {}, {}, [](std::vector<ProbeResult>& results) {
    for (ProbeResult& r : results) {
      if (r.outcome == ProbeOutcome::kUnreachable) r.detail = "No route to host";
      if (r.outcome == ProbeOutcome::kTimeout && r.from == 1) r.detail = "no answer within the probe timeout";
    }
  }));
  const std::string text = report.listing();
  CAPTURE(text);
  CHECK_THAT(text, Contains("  wlp5s0   192.168.77.10  b unreachable (No route to host), c unreachable (No route to host)"
                            "  UNUSABLE\n"
                            "           no route from b, c\n"));
  // Only b said why its probes timed out; an outcome without words stays one word.
  CHECK_THAT(text, Contains("  eth9     10.88.0.10     b timeout (no answer within the probe timeout), c timeout  UNUSABLE\n"));
  CHECK_THAT(text, Contains("  eth1     10.77.0.10     b ok, c ok  -> selected\n"));

  const json doc = json::parse(report.json());
  const json& a = doc["hosts"][0];
  CHECK(interface_named(a, "wlp5s0")["peers"] ==
        json::parse(R"([{"host":"b","outcome":"unreachable","detail":"No route to host"},
                        {"host":"c","outcome":"unreachable","detail":"No route to host"}])"));
  CHECK(interface_named(a, "eth9")["peers"] ==
        json::parse(R"([{"host":"b","outcome":"timeout","detail":"no answer within the probe timeout"},
                        {"host":"c","outcome":"timeout"}])"));
  CHECK(interface_named(a, "eth1")["peers"] == json::parse(R"([{"host":"b","outcome":"ok"},{"host":"c","outcome":"ok"}])"));
}

TEST_CASE("check report settings: the suggested filter selects exactly the chosen NICs", "[check_report]") {
  SECTION("same name everywhere: one NCCL line") {
    CheckInput in = lab_check(2);
    // b's fabric is named eth1 too.
    in.hosts[1].interfaces[1].name = "eth1";
    in.hosts[1].selection.selected->iface = "eth1";
    const CheckReport report(in);
    CHECK(report.settings().network_interface == "--network-interface =eth1");
    CHECK_THAT(report.listing(), Contains("  NCCL_SOCKET_IFNAME==eth1 (every host)\n"));
  }
  SECTION("a chosen name that is another host's unusable NIC: the shared subnet instead") {
    CheckInput in = lab_check(2);
    // b also has an eth1 (up, unusable); "=eth1,=enp6s0" would let it compete with enp6s0 on b.
    in.hosts[1].interfaces.push_back(hvrun::test::make_nic("eth1", {"192.168.9.2"}, {24}));
    CHECK(CheckReport(in).settings().network_interface == "--network-interface 10.77.0.0/24");
  }
}

TEST_CASE("check report JSON has the documented shape", "[check_report]") {
  SECTION("all usable") {
    const json doc = json::parse(CheckReport(lab_check(4)).json());
    check_shape(doc, {"a", "b", "c", "d"});
    CHECK(doc["ok"] == true);
    CHECK(doc["probe_ms"] == 1012);
    const json& b = doc["hosts"][1];
    CHECK(b["ssh"] == json({{"ok", true}, {"error", nullptr}}));
    CHECK(b["agent_version"] == "0.1.0");
    CHECK(b["selected"]["interface"] == "enp6s0");
    CHECK(b["selected"]["address"] == "10.77.0.11");
    // Every NIC in the kernel's order, the ones not probed included.
    Strings names;
    for (const json& nic : b["interfaces"]) names.push_back(nic["name"]);
    CHECK(names == Strings{"lo", "enp6s0", "docker0", "wlp5s0", "eth9"});
    const json& fabric = interface_named(b, "enp6s0");
    CHECK(fabric["usable"] == true);
    CHECK(fabric["reason"].is_null());
    CHECK(fabric["selected"] == true);
    CHECK(fabric["address"] == "10.77.0.11");
    CHECK(fabric["peers"] == json::parse(R"([{"host":"a","outcome":"ok"},{"host":"c","outcome":"ok"},
                                              {"host":"d","outcome":"ok"}])"));
    const json& docker = interface_named(b, "docker0");
    CHECK(docker["usable"] == false);
    CHECK(docker["address"] == "172.17.0.1");
    CHECK(docker["reason"] == "answered as the prober itself (from a, c, d): this address exists on every host");
    const json& lo = interface_named(b, "lo");
    CHECK(lo["usable"] == false);
    CHECK(lo["probed"] == false);
    CHECK(lo["reason"] == "loopback: reaches only its own host");
    CHECK(doc["settings"]["network_interface"] == "--network-interface =eth1,=enp6s0,=enp5s0,=ib0");
    CHECK(doc["settings"]["nccl_socket_ifname"]["d"] == "=ib0");
    CHECK(doc["settings"]["open_mpi_if_include"] == "10.77.0.0/24");
  }
  SECTION("a host without a usable NIC and a host whose SSH failed") {
    const CheckReport report(lab_check(4, {}, one_way_c_to_a(), {3}));
    CHECK_FALSE(report.all_usable());
    CHECK(report.exit_code() == 1);
    const json doc = json::parse(report.json());
    check_shape(doc, {"a", "b", "c", "d"});
    CHECK(doc["ok"] == false);
    CHECK(doc["settings"].is_null());
    const json& a = doc["hosts"][0];
    CHECK(a["selected"].is_null());
    CHECK(interface_named(a, "eth1")["reason"] ==
          "reached from b, d but no answer within 1 s from c: packets dropped?");
    const json& d = doc["hosts"][3];
    CHECK(d["ssh"]["ok"] == false);
    CHECK(d["ssh"]["error"] == "ssh d: connection refused (port 2222)");
    CHECK(d["agent_version"].is_null());
    CHECK(d["interfaces"] == json::array());
    CHECK(d["selected"].is_null());
    CHECK(doc["hosts"][1]["selected"]["interface"] == "enp6s0");
  }
}

TEST_CASE("why nothing is usable: per failing host the NICs' reasons, then what to try", "[check_report]") {
  SECTION("a one-way firewall names the hosts between which to look") {
    const CheckReport report(lab_check(4, {}, one_way_c_to_a()));
    CHECK(report.exit_code() == 1);
    const std::string why = report.why_unusable();
    CHECK(why ==
          "no usable NIC on a: eth1 10.77.0.10: reached from b, d but no answer within 1 s from c: packets dropped?; "
          "docker0 172.17.0.1: answered as the prober itself (from b, c, d): this address exists on every host; "
          "wlp5s0 192.168.77.10: no route from b, c, d; "
          "eth9 10.88.0.10: no answer within 1 s from b, c, d: packets dropped?\n"
          "what to try: check firewalls between a and c (both directions)\n");
    const std::string text = report.listing();
    CHECK_THAT(text, Contains("  a  none: no usable NIC\n"));
    CHECK_THAT(text, Contains("  eth1     10.77.0.10     b ok, c timeout, d ok  UNUSABLE\n"));
    CHECK_THAT(text, Contains(why));
    CHECK_THAT(text, !Contains("settings that work"));
  }
  SECTION("a filter that left out the NIC that works") {
    const CheckReport report(lab_check(3, NicFilter::parse({"^eth1"})));
    const std::string why = report.why_unusable();
    CHECK_THAT(why, Contains("no usable NIC on a: docker0 172.17.0.1: "));
    CHECK_THAT(why, Contains("what to try: no other host reached any NIC of a: check that it shares a network "
                             "with them and that its firewall lets TCP in from them; "
                             "try --network-interface with one of eth1 on a, or without it (it left them out)\n"));
  }
  SECTION("SSH failures and hosts with nothing to probe") {
    CheckInput in = lab_check(3, {}, {}, {1});
    for (auto& nic : in.hosts[2].interfaces) nic.up = nic.loopback;  // c: everything but lo down
    in.hosts[2].selection.nics.clear();
    in.hosts[2].selection.selected.reset();
    in.hosts[2].selection.skipped = {{"lo", "127.0.0.1", "loopback: reaches only its own host"},
                                     {"enp5s0", "10.77.0.12", "down"}};
    const CheckReport report(in);
    CHECK(report.why_unusable() ==
          "b: ssh failed: ssh b: connection refused (port 2222)\n"
          "no usable NIC on c: no NIC to probe (lo: loopback: reaches only its own host; enp5s0: down)\n");
    CHECK_THAT(report.listing(), Contains("\nb: ssh failed: ssh b: connection refused (port 2222)\n"));
    CHECK_THAT(report.listing(), Contains("  b  none: ssh failed\n"));
  }
}
