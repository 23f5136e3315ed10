#include "tests/support/elastic_lab.hpp"

#include <catch2/catch.hpp>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/support/horovod_site.hpp"

namespace hvrun::test {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string started_line(int ranks) { return "elastic: started " + std::to_string(ranks) + " ranks on "; }
std::string joined_pattern(const std::string& host_re) { return host_re + R"( joined: (\d+) ranks now)"; }
std::string lost_pattern(const std::string& host_re) { return host_re + R"( lost \()"; }
std::string blacklisted_pattern(const std::string& host_re) { return host_re + " blacklisted for "; }
std::string left_out_line(const std::string& host) { return host + " is left out of the elastic job: "; }
std::string script_exit_code(int code) { return "exited with code " + std::to_string(code); }
std::string total_line(int size) { return "Total img/sec on " + std::to_string(size) + " CPU(s)"; }

std::string regex_escape(const std::string& s) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(s, special, R"(\$&)");
}

bool has(const std::string& text, const std::string& pattern) {
  return std::regex_search(text, std::regex(pattern));
}

std::optional<int> joined_ranks(const std::string& err, const std::string& host) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex(joined_pattern(regex_escape(host))))) return std::nullopt;
  return std::stoi(m[1].str());
}

bool named_lost(const std::string& err, const std::string& host) {
  const std::string h = regex_escape(host);
  return has(err, lost_pattern(h)) || has(err, blacklisted_pattern(h));
}

std::vector<int> horovod_sizes(const std::string& text) {
  static const std::regex reinit(kReinit);
  std::vector<int> sizes;
  for (std::sregex_iterator it(text.begin(), text.end(), reinit), end; it != end; ++it) {
    const int from = std::stoi((*it)[1].str()), to = std::stoi((*it)[2].str());
    if (sizes.empty()) sizes.push_back(from);
    if (from == sizes.back() && to != from) sizes.push_back(to);
  }
  return sizes;
}

std::string sizes_text(const std::vector<int>& sizes) {
  std::string s;
  for (int v : sizes) s += (s.empty() ? "" : " -> ") + std::to_string(v);
  return s.empty() ? "(no reinitialization line)" : s;
}

std::string transcript(const std::string& out, const std::string& err) {
  std::string reports;
  std::istringstream lines(err);
  for (std::string l; std::getline(lines, l);)
    if (l.find("Sanitizer") != std::string::npos || l.find("runtime error:") != std::string::npos) reports += l + "\n";
  return (reports.empty() ? "" : "--- sanitizer reports in the launcher's stderr:\n" + reports) +
         "--- the launcher's stdout:\n" + out + "\n--- the launcher's stderr:\n" + err;
}

std::optional<std::string> elastic_example() {
  const std::string name = "shared/horovod/examples/elastic/pytorch/pytorch_synthetic_benchmark_elastic.py";
  for (const char* up : {"/../", "/../../"}) {
    const fs::path p = fs::path(source_dir() + up + name);
    if (fs::exists(p)) return fs::weakly_canonical(p).string();
  }
  return std::nullopt;
}

std::vector<std::string> example_args(int iters) {
  return {"--model", "shufflenet_v2_x0_5", "--batch-size", "4", "--num-warmup-batches", "1",
          "--num-batches-per-iter", "1", "--num-iters", std::to_string(iters)};
}

std::optional<std::string> horovod_example_unavailable() {
  if (!horovod_site()) return horovod_missing();
  if (!elastic_example())
    return std::string("skipped: no Horovod examples in ../shared/horovod/examples (beside the checkout)");
  auto r = run({kDebianPython, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torchvision') is None)"},
               60s);
  if (r.exit_code != 0)
    return std::string("skipped: ") + kDebianPython +
           " has no torchvision (the example's models): apt-get install python3-torchvision";
  return std::nullopt;
}

Discovery::Discovery(const fs::path& d) : dir(d), script((d / "discover.sh").string()) {
  std::ofstream(script) << "#!/bin/sh\nexec cat '" << (dir / "hosts").string() << "'\n";
  fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
}

void Discovery::set_hosts(const std::vector<std::string>& lines) const {
  const fs::path tmp = dir / "hosts.new";
  {
    std::ofstream f(tmp);
    for (const auto& l : lines) f << l << "\n";
  }
  fs::rename(tmp, dir / "hosts");
}

std::string write_script(const fs::path& dir, const std::string& name, const std::string& body) {
  const std::string path = (dir / name).string();
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

void Job::await(const std::string& what, std::chrono::milliseconds timeout, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) return met(what);
    if (is_zombie_or_gone(p_.pid())) {
      p_.pump_for(500ms);  // what it printed last
      if (done()) return met(what);
      auto r = p_.wait(10s);
      FAIL("the job ended (exit code " << r.exit_code << ") before " << what << "\n" << transcript(r.out, r.err));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      p_.signal(SIGINT);
      auto r = p_.wait(30s);
      FAIL("not within " << std::chrono::duration_cast<std::chrono::seconds>(timeout).count() << " s: " << what
                         << "\n" << transcript(r.out, r.err));
    }
    p_.pump_for(100ms);
  }
}

ChildResult Job::finish(std::chrono::milliseconds timeout) {
  await("the job's end", timeout, [&] { return is_zombie_or_gone(p_.pid()); });
  return p_.wait(30s);
}

void Job::met(const std::string& what) const {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_);
  std::fprintf(stderr, "elastic lab: %s after %.1f s, at iteration %d\n", what.c_str(), ms.count() / 1000.0,
               iterations());
}

std::vector<int> marked_on_host(const Lab& lab, int i, const std::string& marker, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto pids = lab.processes_on_host(i, marker);
    if (!pids.empty() || std::chrono::steady_clock::now() >= deadline) return pids;
    std::this_thread::sleep_for(200ms);
  }
}

std::vector<std::string> elastic_hvrun(const Lab& lab, const TempHome& home, const Discovery& discovery,
                                       const std::string& marker, int np, std::vector<std::string> extra, int iters) {
  std::vector<std::string> a{"--verbose", "--kill-grace", "2", "-np", std::to_string(np), "--min-np", "2",
                             "--max-np", "4", "--host-discovery-script", discovery.script};
  a.insert(a.end(), extra.begin(), extra.end());
  for (const std::string& e : {"PYTHONPATH=" + *horovod_site(), std::string("HOROVOD_LOG_LEVEL=debug"),
                               std::string("OMP_NUM_THREADS=1"), std::string("PYTHONUNBUFFERED=1"), marker}) {
    a.push_back("-x");
    a.push_back(e);
  }
  a.push_back(kDebianPython);
  a.push_back(*elastic_example());
  for (const auto& x : example_args(iters)) a.push_back(x);
  return hvrun_on(lab, home, a);
}

std::unique_ptr<Job> ElasticLab::two_then_third(std::vector<std::string> extra, int iters) const {
  discovery.set_hosts({host(1) + ":1", host(2) + ":1"});
  auto job = std::make_unique<Job>(hvrun(2, std::move(extra), iters));
  job->await("2 iterations on the first 2 ranks", kStepTimeout, [&] { return job->iterations() >= 2; });
  discovery.set_hosts({host(1) + ":1", host(2) + ":1", host(3) + ":1"});
  return job;
}

}  // namespace hvrun::test
