#include "launcher/start/agent_check.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include <future>
#include <map>
#include <mutex>

#include "common/error.hpp"
#include "common/file_digest.hpp"
#include "launcher/base/shell_quote.hpp"

namespace hvrun {

namespace {

constexpr std::string_view kPrefix = "hvrun-agent-check: ";
constexpr std::size_t kMaxLine = 4096;

// The functions every script starts with. hvrun_try FILE: nothing when FILE is not there or not
// executable; else it opens FILE as descriptor 3 and checks the open file: stat from a child, which
// inherits descriptor 3 (-L: the file itself, not /proc's link; `test -O`, a built-in of dash, bash,
// busybox and ksh, says whether it is the user's without running `id`), and hvrun_sum reading it anew through
// /proc/self/fd/3 (the same inode, from its start): `openssl dgst` where there is one (SHA-NI: 9 ms for
// the 5.4 MiB agent on a loaded lab machine, against 26 ms for coreutils' sha256sum), else sha256sum. Owned by root
// or the user and not writable by group or others, no one else can change the content between the check
// and the exec. `command exec`: a failed redirection of a special built-in would end the shell.
// hvrun_dir DIR: the cache folder is the user's and not writable by others (it receives the upload).
//
// The hash is taken once per file, not once per launch: hashing costs about 10 ms of a host's CPU (openssl
// loads, then reads 5.4 MiB), most of what the check costs. A file that passed leaves a record in
// ~/.cache/hvrun/checked (the user's, not writable by others, nor is ~/.cache/hvrun: else no record is
// read or written), named by the digest, the file's device and inode, holding its owner, mode, size,
// mtime and ctime (stat's %y %z, to the nanosecond where the file system keeps it). The same stat that
// checks the owner reads them, so a launch that finds its record runs the agent without hashing. Sound
// because only the owner (the user or root) can change the content, and any change moves the ctime,
// which no one but root can set; a file another user made in the inode's place is theirs and fails the
// owner check. Any other shape of stat's output (another stat, a missing folder) means hashing.
constexpr std::string_view kFunctions =
    "hvrun_seen=\n"
    "hvrun_p=\"$HOME/.cache/hvrun\"\n"
    "hvrun_r=\"$hvrun_p/checked\"\n"
    "hvrun_say() { echo \"hvrun-agent-check: $*\"; }\n"
    "hvrun_sum() {\n"
    "  { command -v openssl >/dev/null && openssl dgst -sha256 -r </proc/self/fd/3 2>/dev/null; } ||\n"
    "    sha256sum </proc/self/fd/3\n"
    "}\n"
    // $2-$12: the file's owner, mode, device, inode, size, mtime (3 words), ctime (3 words); $13-$23 the
    // record folder's, $24-$34 its parent's.
    "hvrun_known() {\n"
    "  hvrun_k=\"$hvrun_r/$hvrun_h-$4-$5\"\n"
    "  hvrun_v=\"$2 $3 $6 $7 $8 $9 ${10} ${11} ${12}\"\n"
    "  hvrun_ok=\n"
    "  [ $# = 34 ] && [ -O \"$hvrun_r\" ] && [ $((0${14} & 022)) = 0 ] && [ -O \"$hvrun_p\" ] &&\n"
    "    [ $((0${25} & 022)) = 0 ] || return 1\n"
    "  hvrun_ok=1\n"
    "  [ -f \"$hvrun_k\" ] && read -r hvrun_l <\"$hvrun_k\" && [ \"$hvrun_l\" = \"$hvrun_v\" ]\n"
    "}\n"
    "hvrun_note() {\n"
    "  if [ -n \"$hvrun_ok\" ]; then { echo \"$hvrun_v\" >\"$hvrun_k\"; } 2>/dev/null\n"
    "  else mkdir -p -m 700 \"$hvrun_p\" \"$hvrun_r\" 2>/dev/null; fi\n"
    "}\n"
    "hvrun_try() {\n"
    "  [ -x \"$1\" ] || return 0\n"
    "  hvrun_seen=1\n"
    "  { command exec 3<\"$1\"; } 2>/dev/null || { hvrun_say unreadable - \"$1\"; return 0; }\n"
    "  set -- \"$1\" $(stat -L -c '%u %a %d %i %s %y %z' /proc/self/fd/3 \"$hvrun_r\" \"$hvrun_p\" 2>/dev/null)\n"
    "  if [ \"${2:-x}\" != 0 ] && ! [ -O /proc/self/fd/3 ]; then hvrun_say owner \"${2:-?}\" \"$1\"\n"
    "  elif [ $((0$3 & 022)) != 0 ]; then hvrun_say mode \"$3\" \"$1\"\n"
    "  elif hvrun_known \"$@\"; then hvrun_say run - \"$1\"; exec /proc/self/fd/3\n"
    "  else\n"
    "    set -- \"$1\" \"$(hvrun_sum)\"\n"
    "    set -- \"$1\" \"${2%% *}\"\n"
    "    if [ \"$2\" = \"$hvrun_h\" ]; then hvrun_note; hvrun_say run - \"$1\"; exec /proc/self/fd/3; fi\n"
    "    hvrun_say sha256 \"${2:-?}\" \"$1\"\n"
    "  fi\n"
    "  exec 3<&-\n"
    "}\n"
    "hvrun_dir() {\n"
    "  [ -d \"$1\" ] || return 1\n"
    "  set -- \"$1\" $(stat -L -c '%u %a' \"$1\")\n"
    "  if ! [ -O \"$1\" ]; then hvrun_say dir-owner \"${2:-?}\" \"$1\"; return 1; fi\n"
    "  if [ $((0$3 & 022)) != 0 ]; then hvrun_say dir-mode \"$3\" \"$1\"; return 1; fi\n"
    "}\n";

bool is_hex_digest(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

namespace {

std::shared_future<std::string> digest_of(const std::string& local_agent) {
  static std::mutex mutex;
  // Never shrinks: one entry per agent path, and agent_digest's references stay valid.
  static std::map<std::string, std::shared_future<std::string>> digests;
  std::lock_guard lock(mutex);
  auto it = digests.find(local_agent);
  if (it == digests.end())
    it = digests.emplace(local_agent, std::async(std::launch::async, sha256_file, local_agent).share()).first;
  return it->second;
}

}  // namespace

void prefetch_agent_digest(const std::string& local_agent) { digest_of(local_agent); }

const std::string& agent_digest(const std::string& local_agent) { return digest_of(local_agent).get(); }

std::string agent_cache_dir(const std::string& digest) { return ".cache/hvrun/agent-" + digest; }

std::string agent_check_script(const AgentCheckPlan& plan) {
  if (!is_hex_digest(plan.digest)) throw Error("agent check: '" + plan.digest + "' is not a SHA-256");
  const std::string dir = "\"$HOME\"/" + agent_cache_dir(plan.digest);
  std::string s = "hvrun_h=" + plan.digest + "\n";
  s += kFunctions;
  if (!plan.staged.empty()) {
    const std::string staged = "\"$HOME\"/" + shell_quote(plan.staged);
    s += "mv -f " + staged + " " + dir + "/hvrun-agent || rm -f " + staged + "\n";
  }
  for (const std::string& path : plan.paths) s += "hvrun_try " + shell_quote(path) + "\n";
  if (plan.search_path) s += "hvrun_try \"$(command -v hvrun-agent)\"\n";
  if (plan.cache) {
    const std::string cache = "hvrun_dir " + dir + " && hvrun_try " + dir + "/hvrun-agent";
    s += plan.cache_after_mismatch ? "[ -z \"$hvrun_seen\" ] || { " + cache + "; }\n" : cache + "\n";
  }
  s += "hvrun_say none -\nexit " + std::to_string(kAgentCheckNoneStatus) + "\n";
  return s;
}

std::optional<AgentCheckFinding> parse_agent_check_line(std::string_view line) {
  if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  line.remove_prefix(kPrefix.size());
  const auto a = line.find(' ');
  if (a == std::string_view::npos || a == 0) return std::nullopt;
  AgentCheckFinding f{std::string(line.substr(0, a)), {}, {}};
  line.remove_prefix(a + 1);
  const auto b = line.find(' ');
  f.found = std::string(line.substr(0, b));
  if (b != std::string_view::npos) f.path = std::string(line.substr(b + 1));
  if (f.found.empty()) return std::nullopt;
  return f;
}

std::string finding_text(const AgentCheckFinding& f, const std::string& expected_digest) {
  if (f.what == "sha256")
    return f.path + " has SHA-256 " + f.found + ", not " + expected_digest + " (this hvrun's agent)";
  if (f.what == "owner") return f.path + " is owned by uid " + f.found + ", neither you nor root";
  if (f.what == "mode") return f.path + " is writable by group or others (mode " + f.found + ")";
  if (f.what == "unreadable") return f.path + " cannot be read to check it";
  if (f.what == "dir-owner") return "the folder " + f.path + " is owned by uid " + f.found + ", not you";
  if (f.what == "dir-mode") return "the folder " + f.path + " is writable by group or others (mode " + f.found + ")";
  return f.path + ": " + f.what + " " + f.found;
}

std::string findings_text(const std::vector<AgentCheckFinding>& findings, const std::string& expected_digest) {
  std::string text;
  for (const auto& f : findings) {
    if (f.what == "run" || f.what == "none") continue;
    text += (text.empty() ? "" : "; ") + finding_text(f, expected_digest);
  }
  return text;
}

bool AgentCheckReport::none() const {
  for (const auto& f : findings)
    if (f.what == "none") return true;
  return false;
}

std::string AgentCheckReport::ran() const {
  for (const auto& f : findings)
    if (f.what == "run") return f.path;
  return {};
}

AgentCheckReport read_agent_check(int fd, std::chrono::milliseconds timeout, const std::string& host) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  AgentCheckReport report;
  // What is waiting is peeked at, and only report bytes are taken: a line's first byte tells the report
  // ('h') from the hello (frame magic "HVR1"), which stays for the job's channel with all that follows it.
  // A few calls per host, not two per byte: each of 32 hosts' reports is read on hvrun's CPU.
  std::string buffer(kMaxLine, '\0');
  std::string line;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    const int ready =
        retry_eintr([&] { return ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0))); });
    if (ready < 0) throw_errno("poll", "waiting for the agent on " + host);
    if (ready == 0) {
      report.end = AgentCheckReport::End::kTimeout;
      return report;
    }
    const ssize_t got = retry_eintr([&] { return ::recv(fd, buffer.data(), buffer.size(), MSG_PEEK); });
    // A command that ended without reading the script it was sent resets the socket: an end as well.
    if (got < 0 && errno != ECONNRESET) throw_errno("recv", "waiting for the agent on " + host);
    if (got <= 0) {
      report.end = AgentCheckReport::End::kEnded;
      return report;
    }
    const std::string_view waiting(buffer.data(), static_cast<std::size_t>(got));
    if (line.empty() && waiting.front() != kPrefix[0]) {
      report.end = AgentCheckReport::End::kHello;
      return report;
    }
    // The rest of the line that has begun: up to its newline, or all that is there (nothing after a line's
    // end is taken before its first byte is seen).
    const auto newline = waiting.find('\n');
    const std::size_t take = newline == std::string_view::npos ? waiting.size() : newline + 1;
    if (retry_eintr([&] { return ::recv(fd, buffer.data(), take, 0); }) != static_cast<ssize_t>(take))
      throw_errno("recv", "waiting for the agent on " + host);
    line.append(buffer.data(), newline == std::string_view::npos ? take : newline);
    if (line.size() > kMaxLine) throw Error(host + ": the remote shell wrote a line of over 4 KiB before hvrun-agent");
    if (newline == std::string_view::npos) continue;
    auto finding = parse_agent_check_line(line);
    if (!finding)
      throw Error(host + ": the remote shell wrote '" + line +
                  "' before hvrun-agent started; make the shell's start-up files write nothing for a command");
    report.findings.push_back(std::move(*finding));
    line.clear();
  }
}

}  // namespace hvrun
