// --check-only at size on the lab: 12 and 32 trap hosts with one one-way firewall (host 5 drops the
// connections host 6 opens to it). One 32-host lab serves every case: bringing it up is the test's
// largest cost. The default text stays within its line and width bounds and names the pair on its
// first screen; --matrix shows the pair as an asymmetric cell; --report writes a page that Chromium
// renders with the pair's cell red.
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"
#include "tests/support/lab_hvrun.hpp"
#include "tests/support/report_text.hpp"

using namespace hvrun::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Catch::Contains;

namespace {

// Why Chromium cannot take the screenshot here, or nothing.
std::optional<std::string> no_chromium() {
  if (::access("/usr/bin/chromium", X_OK) != 0) return "no /usr/bin/chromium (scripts/setup.sh installs it)";
  if (::access("/usr/bin/python3", X_OK) != 0) return "no /usr/bin/python3 (scripts/setup.sh installs it)";
  return std::nullopt;
}

std::vector<std::string> chromium(const fs::path& profile, std::vector<std::string> args) {
  // --no-sandbox: root; --disable-dev-shm-usage: containers with a small /dev/shm.
  std::vector<std::string> cmd{"/usr/bin/chromium",
                               "--headless",
                               "--no-sandbox",
                               "--disable-gpu",
                               "--disable-dev-shm-usage",
                               "--user-data-dir=" + profile.string(),
                               "--force-device-scale-factor=1",
                               "--window-size=1400,1400",
                               "--hide-scrollbars"};
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

}  // namespace

TEST_CASE("check-only output stays readable at 12 and 32 lab hosts and shows a one-way firewall", "[lab][check_lab]") {
  HVRUN_SKIP_WITHOUT_LAB();
  Lab lab(32);
  TempHome home;
  const auto names = lab.list("LAB_HOSTS");
  REQUIRE(names.size() == 32);
  const auto host_list = [&](std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out += (out.empty() ? "" : ",") + names[i];
    return out;
  };
  REQUIRE(lab.control({"oneway", "5", "6"}) == 0);  // host 5 drops what host 6 opens; 5 -> 6 works
  const std::string pair_line =
      "one-way: " + names[6] + " -> " + names[5] + " timeout, " + names[5] + " -> " + names[6] + " ok";

  for (const std::size_t n : {std::size_t{12}, std::size_t{32}}) {
    INFO("default text on " << n << " hosts: at most " << (n == 12 ? 30 : 60)
                            << " lines of at most 100 columns, the pair in the first 5 lines");
    auto r = run(hvrun_on(lab, home, {"--check-only", "-H", host_list(n)}), 120s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    const auto lines = lines_of(r.out);
    CHECK(lines.size() <= (n == 12 ? 30u : 60u));
    CHECK(widest(lines) <= 100);
    const std::string screen = first_lines(lines, 5);
    CHECK_THAT(screen, Contains("1 not ready (" + names[5] + ")"));
    CHECK_THAT(screen, Contains(names[5] + ": no usable NIC; best ") && Contains("timeout from " + names[6]));
    CHECK_THAT(screen, Contains(pair_line));
    CHECK_THAT(r.out, Contains("\non every host, not used:\n"));
    CHECK_THAT(r.out, Contains("docker0 172.17.0.1: wrong-host from all: 172.17.0.1 is on every host"));
    CHECK_THAT(r.out, Contains("not considered: vethdk0: a port of a bridge"));  // docker0 is its master
    CHECK(count_of(r.out, "docker0") == 1);
  }
  {
    INFO("--matrix on 32 hosts: row 6 fails in column 5, row 5 is ok in column 6");
    auto r = run(hvrun_on(lab, home, {"--check-only", "--matrix", "-H", host_list(32)}), 120s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    const auto lines = lines_of(r.out);
    CHECK(widest(lines) <= 100);
    const auto row = [&](std::size_t i) -> std::string {
      for (const auto& l : lines)
        if (l.starts_with(std::to_string(i) + " " + names[i] + " ")) return l;
      return "";
    };
    const std::size_t col0 = row(0).find('\\');
    REQUIRE(col0 != std::string::npos);
    REQUIRE(row(6).size() >= col0 + 32);
    REQUIRE(row(5).size() >= col0 + 32);
    CHECK(row(6)[col0 + 5] == 't');
    CHECK(row(5)[col0 + 6] == '.');
    CHECK(row(6).substr(col0, 32).find_first_not_of(".\\t") == std::string::npos);
    CHECK_THAT(r.out, Contains(pair_line));
  }
  {
    INFO("--verbose keeps the full listing; --report writes the page, Chromium renders the pair's cell red");
    const fs::path dir = home.dir / "report";
    fs::create_directories(dir);
    const fs::path page = dir / "check.html";
    auto r =
        run(hvrun_on(lab, home, {"--check-only", "--verbose", "--report", page.string(), "-H", host_list(12)}), 120s);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.out, Contains("UNUSABLE") && Contains("NIC per host:"));
    REQUIRE(fs::exists(page));
    std::string html;
    {
      std::ifstream in(page);
      html.assign(std::istreambuf_iterator<char>(in), {});
    }
    const std::string cell = "<td class=\"fail\" data-from=\"" + names[6] + "\" data-to=\"" + names[5] + "\"";
    CHECK_THAT(html, Contains(cell));
    CHECK_THAT(html, Contains("<li>" + std::regex_replace(pair_line, std::regex(">"), "&gt;") + "</li>"));
    if (auto why = no_chromium()) {
      WARN("Chromium part skipped: " << *why);
      return;
    }
    // A copy with a script that writes the cell's box into the DOM: --dump-dom reports where it is,
    // the screenshot of the page itself (no script) shows what is there.
    const fs::path probe = dir / "probe.html";
    {
      std::ofstream out(probe);
      out << html.substr(0, html.rfind("</body>"))
          << "<script>const at = (f, t) => { const r = document.querySelector('#matrix-chosen td[data-from=\"' + f + "
             "'\"][data-to=\"' + t + '\"]').getBoundingClientRect(); return Math.round(r.left + 3) + ',' + "
             "Math.round(r.top + 3); }; document.body.setAttribute('data-cells', at('"
          << names[6] << "', '" << names[5] << "') + ';' + at('" << names[5] << "', '" << names[6]
          << "'));</script></body></html>\n";
    }
    auto dom = run(chromium(dir / "profile", {"--dump-dom", "file://" + probe.string()}), 120s);
    INFO(dom.err);
    REQUIRE(dom.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(dom.out, m, std::regex(R"(data-cells="([0-9]+),([0-9]+);([0-9]+),([0-9]+)\")")));
    CHECK_THAT(dom.out, Contains("one-way: " + names[6] + " -&gt; " + names[5]));
    const fs::path png = dir / "check.png";
    auto shot = run(chromium(dir / "profile", {"--screenshot=" + png.string(), "file://" + page.string()}), 120s);
    INFO(shot.err);
    REQUIRE(shot.exit_code == 0);
    REQUIRE(fs::exists(png));
    if (const char* keep = std::getenv("HVRUN_TEST_KEEP_SCREENSHOT"))
      fs::copy_file(png, keep, fs::copy_options::overwrite_existing);
    const auto pixel = [&](const std::string& x, const std::string& y) {
      auto px = run(
          {"/usr/bin/python3", source_dir() + "/tests/support/png_pixel.py", png.string(), x, y}, 60s);
      INFO("pixel at " << x << "," << y << ": " << px.out << px.err);
      CHECK(px.exit_code == 0);
      std::array<int, 3> rgb{};
      std::istringstream(px.out) >> rgb[0] >> rgb[1] >> rgb[2];
      return rgb;
    };
    // Host 6 -> host 5 is red (#d7261e); its mirror, host 5 -> host 6, green (#2e9e44): asymmetric.
    const auto failing = pixel(m[1].str(), m[2].str());
    CHECK((failing[0] > 180 && failing[1] < 80 && failing[2] < 80));
    const auto mirror = pixel(m[3].str(), m[4].str());
    CHECK((mirror[1] > 120 && mirror[0] < 100));
  }
  lab.control({"oneway-clear", "5"});
}
