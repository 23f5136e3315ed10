#pragma once
// The one remote step that checks a host's hvrun-agent and executes it: a POSIX sh script that opens
// each candidate file as descriptor 3, checks that open file (owned by the user or root, not writable
// by group or others, so its content cannot change after the check; SHA-256 equal to that of the agent
// hvrun means to run) and executes that same open file (`exec /proc/self/fd/3`, what fexecve does). The
// descriptor pins the inode: a rename or a swap of the path after the check changes nothing. The
// script reports on stdout, before the agent's hello, one line per candidate that is there but fails
// ("hvrun-agent-check: WHAT FOUND PATH"), "hvrun-agent-check: run - PATH" right before the exec, and
// "hvrun-agent-check: none -" before it exits 97 when no candidate passed. The hello begins with the
// frame magic "HVR1", never with the lowercase 'h' of these lines.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hvrun {

struct AgentCheckPlan {
  std::string digest;               // lowercase hex SHA-256 of the agent hvrun means to run
  std::vector<std::string> paths;   // absolute paths on the host, tried in order
  bool search_path = false;         // then `hvrun-agent` on the remote shell's PATH
  // Then the copy hvrun keeps in ~/.cache/hvrun/agent-<digest>/hvrun-agent, its folder owned by the
  // user and not writable by others. With cache_after_mismatch, only when a candidate was there but
  // failed its check (--agent-path: a path that is not there stays the user's mistake to fix).
  bool cache = false;
  bool cache_after_mismatch = false;
  // Not empty: first `mv -f` this file (relative to the home directory) over the cached copy (the
  // upload that replaces it).
  std::string staged;
};

// The SHA-256 of this machine's agent at `local_agent`, computed once per path for all hosts, on a thread
// of its own from the first call of either (common/file_digest.hpp: throws SystemError naming the file).
// prefetch_agent_digest starts it without waiting (before a connect, which it then overlaps). Thread-safe.
void prefetch_agent_digest(const std::string& local_agent);
const std::string& agent_digest(const std::string& local_agent);

// ~/.cache/hvrun/agent-<digest>, relative to the home directory.
std::string agent_cache_dir(const std::string& digest);

// The script; run by a POSIX shell (the login shell of an SSH exec, `/bin/sh -c`, or `/bin/sh` reading it
// on stdin: it reads nothing past its last line, and the agent it executes inherits stdin).
std::string agent_check_script(const AgentCheckPlan& plan);

inline constexpr int kAgentCheckNoneStatus = 97;

struct AgentCheckFinding {
  std::string what;   // owner, mode, sha256, unreadable, dir-owner, dir-mode, run, none
  std::string found;  // the uid, octal mode or SHA-256 found; "-" when none applies
  std::string path;   // the file or folder, as the host's shell spelled it
};

// One line of the script's report (without its newline); nothing when it is not one.
std::optional<AgentCheckFinding> parse_agent_check_line(std::string_view line);

// What a failing finding says: "/opt/hvrun-agent has SHA-256 1a2b..., not ab12... (this hvrun's agent)".
std::string finding_text(const AgentCheckFinding& finding, const std::string& expected_digest);
// All failing findings of `findings`, joined with "; " ("run" and "none" left out).
std::string findings_text(const std::vector<AgentCheckFinding>& findings, const std::string& expected_digest);

struct AgentCheckReport {
  enum class End { kHello, kEnded, kTimeout } end = End::kEnded;
  std::vector<AgentCheckFinding> findings;  // in the order the script wrote them
  bool none() const;                       // the script found no candidate that passed
  std::string ran() const;                 // the path of the "run" finding; empty if none
};

// Reads the script's lines from `fd` (a stream socket) until the agent's first byte of hello, which it
// leaves unread, or the end of the stream, or `timeout`. A line that is not the script's is an Error
// naming `host` and quoting it.
AgentCheckReport read_agent_check(int fd, std::chrono::milliseconds timeout, const std::string& host);

}  // namespace hvrun
