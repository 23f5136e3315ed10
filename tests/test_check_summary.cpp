// The short forms of --check-only (summary, matrix, HTML page, the grouped JSON fields) on synthetic
// checks of 12 to 500 hosts with the lab's traps: their size bounds, and that the one firewalled pair
// is named where a person looks first.
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/base/host_names.hpp"
#include "launcher/base/text_layout.hpp"
#include "launcher/check/check_html.hpp"
#include "launcher/check/check_matrix.hpp"
#include "launcher/check/check_report.hpp"
#include "launcher/check/check_summary.hpp"
#include "tests/support/nic_lab.hpp"
#include "tests/support/report_text.hpp"

using Catch::Contains;
using hvrun::CheckInput;
using hvrun::CheckReport;
using namespace hvrun::test::trap_lab;
using hvrun::InterfaceInfo;
using hvrun::test::first_lines;
using hvrun::test::lines_of;
using hvrun::test::widest;
using Strings = std::vector<std::string>;

namespace {

std::string node(std::size_t i) { return "node" + std::to_string(i); }

// `count` hosts node0.. with the lab's traps: the fabric NIC (eight names, cycled), docker0 with
// 172.17.0.1 everywhere, wlp5s0 reaching nobody, eth9 dropping everything, and vethdk0, a bridge port
// with a link-local address only. `lean`: fabric and docker0 only (for hundreds of hosts).
std::vector<HostInventory> hosts_of(std::size_t count, bool lean = false) {
  static const Strings kFabric{"eth1", "enp6s0", "enp5s0", "ib0", "ens3f0", "eno1", "enp129s0f1", "eth0"};
  std::vector<HostInventory> out;
  for (std::size_t i = 0; i < count; ++i) {
    const std::string a = std::to_string(i / 200) + "." + std::to_string(10 + i % 200);
    const std::string fab = kFabric[i % kFabric.size()];
    HostInventory h{node(i), node(i), {make_nic("lo", {"127.0.0.1"}, {8}), make_nic(fab, {"10.77." + a}, {16})}};
    h.interfaces.push_back(make_nic("docker0", {"172.17.0.1"}, {16}, true, -1));
    if (!lean) {
      h.interfaces.push_back(make_nic("wlp5s0", {"192.168." + a}, {16}));
      h.interfaces.push_back(make_nic("eth9", {"10.88." + a}, {16}));
      h.interfaces.push_back(make_nic("vethdk0", {"fe80::4c:4:0:0:" + std::to_string(i) + "%vethdk0"}, {64}));
    }
    out.push_back(std::move(h));
  }
  return out;
}

// A check as the launcher makes it; `blocked(from, to)` makes from's probes of to's NICs time out.
CheckInput check_of(const std::vector<HostInventory>& hosts,
                    const std::function<bool(std::size_t, std::size_t)>& blocked = {}) {
  const auto targets = hvrun::probe_targets(hosts, {}, false);
  const auto results = hvrun::test::lab_probe(
      hosts, targets, [&](std::size_t from, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
        // A firewall drops what reaches the host; docker0's probe never leaves the prober, wlp5s0's has no route.
        const bool passes_firewall = t.iface != "docker0" && t.iface != "wlp5s0";
        if (blocked && passes_firewall && blocked(from, t.host)) return ProbeOutcome::kTimeout;
        return std::nullopt;
      });
  const auto selections = hvrun::select_nics(hosts, targets, results, {}, false);
  CheckInput in;
  in.probe_time = std::chrono::milliseconds(1012);
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    hvrun::HostCheck h;
    h.host = hosts[i].host;
    h.agent_version = "0.1.0";
    h.interfaces = hosts[i].interfaces;
    h.selection = selections[i];
    in.hosts.push_back(std::move(h));
  }
  return in;
}

}  // namespace

TEST_CASE("host names fold into ranges and rack-like groups", "[check_summary]") {
  CHECK(hvrun::fold_names({"lab1", "lab2", "lab3", "db"}) == "lab[1-3], db");
  CHECK(hvrun::fold_names({"a"}) == "a");
  CHECK(hvrun::fold_names({"n07", "n08", "n10", "n09", "n12"}) == "n[07-10,12]");
  CHECK(hvrun::fold_names({"h5", "h6"}) == "h[5-6]");
  CHECK(hvrun::fold_names({"h8", "h9", "h10", "h12"}) == "h[8-10,12]");
  CHECK(hvrun::fold_names({"h08", "h09", "h100"}) == "h[08-09,100]");
  Strings many;
  for (std::size_t i = 0; i < 500; ++i) many.push_back(node(i));
  const auto groups = hvrun::name_groups(many, 64);
  CHECK(groups.size() <= 64);
  CHECK(groups.size() > 1);
  std::size_t total = 0;
  for (const auto& g : groups) total += g.size();
  CHECK(total == 500);
  CHECK(hvrun::name_groups({"a", "b"}, 64).size() == 2);
}

TEST_CASE("lines wrap at spaces to the width, keeping their indentation", "[check_summary]") {
  CHECK(hvrun::wrap_line("  short line", 100) == "  short line\n");
  const std::string wrapped =
      hvrun::wrap_line("  " + std::string(30, 'a') + " " + std::string(30, 'b') + " " + std::string(30, 'c'), 70, 6);
  CHECK(wrapped == "  " + std::string(30, 'a') + " " + std::string(30, 'b') + "\n      " + std::string(30, 'c') + "\n");
  CHECK(widest(lines_of(hvrun::wrap_line(std::string(250, 'x'), 100))) == 100);
}

TEST_CASE("the summary of 12 hosts: every host on a line, each trap said once, true reasons", "[check_summary]") {
  const CheckReport report(check_of(hosts_of(12)));
  const std::string text = report.summary(100);
  INFO(text);
  const Strings lines = lines_of(text);
  CHECK(lines.size() <= 36);
  CHECK(widest(lines) <= 100);
  CHECK(lines[0] == "hvrun --check-only: 12 hosts, probes took 1012 ms: every host has a usable NIC");
  CHECK_THAT(text, Contains("  node0   eth1       10.77.0.10\n"));
  CHECK_THAT(text, Contains("  node11  ib0        10.77.0.21\n"));
  CHECK_THAT(text, Contains("\non every host, not used:\n"));
  CHECK_THAT(text, Contains("  docker0 172.17.0.1: wrong-host from all: 172.17.0.1 is on every host (probes land on "
                            "the prober)\n"));
  CHECK_THAT(text, Contains("  eth9: timeout from all: no answer within 1 s, packets dropped on the way"));
  CHECK_THAT(text, Contains("  wlp5s0: unreachable from all: no route to it from there\n"));
  CHECK_THAT(text, Contains("  not considered: vethdk0: link-local addresses only"));
  CHECK_THAT(text, Contains("  not considered: lo: loopback"));
  // Each trap once, not once per host; the link-local NIC never as dropped packets.
  CHECK(lines.end() - std::find_if(lines.begin(), lines.end(),
                                   [](const std::string& l) { return l.find("docker0") != std::string::npos; }) >=
        1);
  CHECK(std::count_if(lines.begin(), lines.end(),
                      [](const std::string& l) { return l.find("docker0") != std::string::npos; }) == 1);
  for (const auto& l : lines)
    if (l.find("vethdk0") != std::string::npos) CHECK(l.find("dropped") == std::string::npos);
  CHECK_THAT(text, Contains("NCCL_SOCKET_IFNAME==eth1 on node[0,8]; NCCL_SOCKET_IFNAME==enp6s0 on node[1,9]"));
  CHECK_THAT(text, Contains("  Open MPI: mpirun --mca btl_tcp_if_include 10.77.0.0/16"));
}

TEST_CASE("a NIC nobody reaches is one trap, however its failures split by timing", "[check_summary]") {
  // A failed neighbour lookup: the first probers time out, the later ones get "unreachable".
  const auto hosts = hosts_of(6);
  const auto targets = hvrun::probe_targets(hosts, {}, false);
  const auto results =
      hvrun::test::lab_probe(hosts, targets, [](std::size_t from, const ProbeTarget& t) -> std::optional<ProbeOutcome> {
        if (t.iface == "wlp5s0" && t.host < 2 && from >= 3) return ProbeOutcome::kTimeout;
        return std::nullopt;
      });
  CheckInput in = check_of(hosts);
  const auto selections = hvrun::select_nics(hosts, targets, results, {}, false);
  for (std::size_t i = 0; i < hosts.size(); ++i) in.hosts[i].selection = selections[i];
  const std::string text = CheckReport(in).summary(100);
  INFO(text);
  CHECK_THAT(text, Contains("\non every host, not used:\n"));
  CHECK_THAT(text, Contains("  wlp5s0: timeout or unreachable from all: no host reached it\n"));
  CHECK_THAT(text, !Contains("also not used"));
}

TEST_CASE("hundreds of NICs skipped for one reason cost one line", "[check_summary]") {
  auto hosts = hosts_of(4);
  for (auto& h : hosts)
    for (int i = 0; i < 200; ++i) {
      auto veth =
          make_nic("veth" + std::to_string(i * 7919 % 100000) + "x", {"fe80::" + std::to_string(i) + "%v"}, {64});
      h.interfaces.push_back(std::move(veth));
    }
  const std::string text = CheckReport(check_of(hosts)).summary(100);
  INFO(text);
  CHECK(lines_of(text).size() <= 30);
  CHECK_THAT(text,
             Contains("  not considered: vethdk0, veth0x, veth7919x, veth15838x and 197 more: link-local addresses "
                      "only"));
}

TEST_CASE("the summary of 32 hosts with a one-way firewall names the pair on its first screen", "[check_summary]") {
  // node6 cannot open connections to node5; node5's to node6 work (a host firewall on node5).
  const CheckReport report(
      check_of(hosts_of(32), [](std::size_t from, std::size_t to) { return from == 6 && to == 5; }));
  const std::string text = report.summary(100);
  INFO(text);
  const Strings lines = lines_of(text);
  CHECK(lines.size() <= 60);
  CHECK(widest(lines) <= 100);
  const std::string screen = first_lines(lines, 5);
  CHECK_THAT(screen, Contains("1 not ready (node5)"));
  CHECK_THAT(screen, Contains("node5: no usable NIC; best eno1 10.77.0.15: timeout from node6 (ok from the other 30)"));
  CHECK_THAT(screen, Contains("one-way: node6 -> node5 timeout, node5 -> node6 ok"));
  CHECK_THAT(text, Contains("  node5   none: no usable NIC\n"));
  CHECK_THAT(text, !Contains("settings that work"));
  CHECK(report.exit_code() == 1);
}

TEST_CASE("the summary of 500 hosts packs the ready ones and stays within the width", "[check_summary]") {
  const CheckReport report(
      check_of(hosts_of(500, true), [](std::size_t from, std::size_t to) { return from == 321 && to == 123; }));
  const std::string text = report.summary(100);
  const Strings lines = lines_of(text);
  INFO(first_lines(lines, 20));
  CHECK(widest(lines) <= 100);
  CHECK(lines.size() <= 50);
  CHECK_THAT(text, Contains("  eth1 on 63 hosts: node[0,8,16,24,32,"));
  CHECK_THAT(first_lines(lines, 4), Contains("node123: no usable NIC") && Contains("timeout from node321"));
  CHECK_THAT(first_lines(lines, 4), Contains("one-way: node321 -> node123 timeout"));
}

TEST_CASE("the matrix shows a one-way firewall as an asymmetric cell", "[check_summary]") {
  const CheckInput in = check_of(hosts_of(32), [](std::size_t from, std::size_t to) { return from == 6 && to == 5; });
  const std::string text = hvrun::matrix_text(in, false, 100);
  INFO(text);
  const Strings lines = lines_of(text);
  CHECK(widest(lines) <= 100);
  // Row i is host i's line: the title, the tens and the units come first.
  const auto row = [&](std::size_t i) { return lines.at(3 + i); };
  const std::size_t col0 = row(0).find('\\');
  REQUIRE(col0 != std::string::npos);
  CHECK(row(6).substr(col0, 32) == std::string(5, '.') + "t\\" + std::string(25, '.'));
  CHECK(row(5).substr(col0, 32) == std::string(5, '.') + "\\" + std::string(26, '.'));
  CHECK_THAT(row(6), Contains("6 node6"));
  CHECK_THAT(text, Contains("one-way: node6 -> node5 timeout, node5 -> node6 ok\n"));
  CHECK_THAT(hvrun::matrix_text(in, true, 100), Contains("\x1b[1;31mt"));
  SECTION("beyond 64 hosts the hosts fold into groups") {
    const CheckInput big =
        check_of(hosts_of(200, true), [](std::size_t from, std::size_t to) { return from == 150 && to == 42; });
    const Strings folded = lines_of(hvrun::matrix_text(big, false, 100));
    INFO(first_lines(folded, 40));
    CHECK(widest(folded) <= 100);
    CHECK(folded.size() <= 64 + 8);
    std::size_t failing = 0;
    for (const auto& l : folded)
      failing += l.find("node[") != std::string::npos && l.find('t') != std::string::npos ? 1 : 0;
    CHECK(failing >= 1);
  }
}

TEST_CASE("the HTML page is self-contained, with a matrix per NIC and every verdict on hover", "[check_summary]") {
  const CheckReport report(
      check_of(hosts_of(12), [](std::size_t from, std::size_t to) { return from == 6 && to == 5; }));
  const std::string page = report.html();
  CHECK(page.starts_with("<!DOCTYPE html>"));
  CHECK_THAT(page, !Contains("http://") && !Contains("https://") && !Contains("<script") && !Contains("<link"));
  CHECK_THAT(page, Contains("<pre id=\"summary\">hvrun --check-only: 12 hosts"));
  CHECK_THAT(page,
             Contains("id=\"matrix-chosen\"") && Contains("id=\"matrix-docker0\"") && Contains("id=\"matrix-eth9\""));
  CHECK_THAT(page, Contains("<td class=\"fail\" data-from=\"node6\" data-to=\"node5\" title=\"node6 -&gt; node5 "
                            "eno1 10.77.0.15: timeout after 1001 ms\">t</td>"));
  CHECK_THAT(page, Contains("<li>one-way: node6 -&gt; node5 timeout, node5 -&gt; node6 ok</li>"));
  CHECK(hvrun::html_escape("<a href='x'>&\"") == "&lt;a href=&#39;x&#39;&gt;&amp;&quot;");
}

TEST_CASE("JSON keeps its fields and adds the grouped ones", "[check_summary]") {
  const CheckReport report(
      check_of(hosts_of(4), [](std::size_t from, std::size_t to) { return from == 2 && to == 1; }));
  const auto doc = nlohmann::json::parse(report.json());
  for (const char* key : {"ok", "probe_ms", "hosts", "settings"}) CHECK(doc.contains(key));
  REQUIRE(doc.at("one_way").size() == 1);
  CHECK(doc["one_way"][0] == nlohmann::json{{"from", "node2"}, {"to", "node1"}, {"outcome", "timeout"}});
  CHECK(doc.at("not_ready") ==
        nlohmann::json::array({"node1: no usable NIC; best enp6s0 10.77.0.11: timeout from node2 "
                               "(ok from the other 2): no answer within 1 s, packets dropped "
                               "on the way (a firewall?)"}));
  bool saw = false;
  for (const auto& g : doc.at("grouped")) {
    if (g.at("host") == "node0" && g.at("interface") == "docker0") {
      CHECK(g.at("verdict") == "wrong-host from all");
      saw = true;
    }
  }
  CHECK(saw);
}
