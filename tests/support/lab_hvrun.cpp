#include "tests/support/lab_hvrun.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <fstream>
#include <regex>
#include <thread>

namespace hvrun::test {

namespace fs = std::filesystem;

TempHome::TempHome() : dir(fs::temp_directory_path() / ("hvrun-home-" + std::to_string(::getpid()))) {
  fs::remove_all(dir);
  fs::create_directories(dir / ".ssh");
}

TempHome::~TempHome() {
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

std::map<int, std::string> rank_lines(const std::string& out, const std::string& head) {
  const std::regex line(R"(\[(\d+)\]<stdout>:)" + head + R"( rank=(\d+) (.*))");
  std::map<int, std::string> lines;
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it) {
    CHECK((*it)[1].str() == (*it)[2].str());
    lines[std::stoi((*it)[2].str())] = (*it)[3].str();
  }
  return lines;
}

SharedDir::SharedDir(const std::string& name)
    : dir(fs::temp_directory_path() / ("hvrun-" + name + "-" + std::to_string(::getpid()))) {
  fs::remove_all(dir);
  fs::create_directories(dir);
}

SharedDir::~SharedDir() {
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

std::vector<std::string> hvrun_on(const Lab& lab, const TempHome& home, std::vector<std::string> args, int host,
                                  const std::string& hvrun) {
  std::vector<std::string> cmd{"/usr/bin/env", "HOME=" + home.dir.string(), hvrun, "-p", lab.var("LAB_PORT"), "-i",
                               lab.var("LAB_KEY")};
  cmd.insert(cmd.end(), args.begin(), args.end());
  return lab.on_host(host, cmd);
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

std::map<std::string, pid_t> agent_pids(const std::string& verbose_stderr) {
  static const std::regex up(R"(agent on (\S+) is up \(hostname \S+, pid ([0-9]+))");
  std::map<std::string, pid_t> pids;
  for (std::sregex_iterator it(verbose_stderr.begin(), verbose_stderr.end(), up), end; it != end; ++it)
    pids[(*it)[1].str()] = static_cast<pid_t>(std::stol((*it)[2].str()));
  return pids;
}

std::vector<pid_t> agents_left(const std::map<std::string, pid_t>& agents, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<pid_t> left;
    for (const auto& [host, pid] : agents) {
      std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
      std::string name;
      std::getline(comm, name);
      if (name == "hvrun-agent" && !is_zombie_or_gone(pid)) left.push_back(pid);
    }
    if (left.empty() || std::chrono::steady_clock::now() >= deadline) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace hvrun::test
