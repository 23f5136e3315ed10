#pragma once
// Test support: running hvrun on lab host 0 against the other lab hosts, and checking what it leaves.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/child_process.hpp"
#include "tests/support/lab.hpp"

namespace hvrun::test {

// A HOME of its own for hvrun, so root's real ~/.ssh is never read or written; removed at the end.
struct TempHome {
  std::filesystem::path dir;
  TempHome();
  ~TempHome();
  TempHome(const TempHome&) = delete;
  TempHome& operator=(const TempHome&) = delete;
};

// A folder every lab host sees (they share this machine's file system): /tmp/hvrun-NAME-PID, removed at
// the end. A host's own view of part of it comes from lab.sh bind.
struct SharedDir {
  std::filesystem::path dir;
  explicit SharedDir(const std::string& name);
  ~SharedDir();
  SharedDir(const SharedDir&) = delete;
  SharedDir& operator=(const SharedDir&) = delete;
};

// argv running `hvrun -p LAB_PORT -i LAB_KEY ARGS...` on lab host `host` with `home` as HOME.
std::vector<std::string> hvrun_on(const Lab& lab, const TempHome& home, std::vector<std::string> args, int host = 0,
                                  const std::string& hvrun = hvrun_bin());

// The lines "[R]<stdout>:HEAD rank=R REST" of hvrun's stdout `out` (HEAD: letters and spaces), as R -> REST;
// a line that hvrun's prefix gives to another rank than its text names fails the test.
std::map<int, std::string> rank_lines(const std::string& out, const std::string& head);

// How often `needle` occurs in `text`.
int count_of(const std::string& text, const std::string& needle);

// The agents' pids by host, from hvrun --verbose's "agent on HOST is up (hostname H, pid N" lines.
std::map<std::string, pid_t> agent_pids(const std::string& verbose_stderr);
// Those of `agents` that still run hvrun-agent, after waiting up to `timeout` for them to go.
std::vector<pid_t> agents_left(const std::map<std::string, pid_t>& agents, std::chrono::milliseconds timeout);

}  // namespace hvrun::test
