// hvrun-agent: started by hvrun (over SSH, or over pipes on the launcher's own host). It speaks the
// framed protocol on stdin/stdout; a human has no reason to run it by hand.
#include <sys/prctl.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>
#include <iostream>
#include <openssl/crypto.h>

#include "agent/agent.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/open_files_limit.hpp"
#include "common/user_message.hpp"
#include "hvrun/version.hpp"

namespace {

// Whatever the agent inherits above stderr is not its own: the check script's descriptor 3 (the agent's
// file, which it executed) or a remote shell's. The channel is stdin/stdout on every way it is started
// (SSH, --rsh-agent, srun, and the local agent's socketpair), and the agent has opened nothing yet.
void close_inherited_descriptors() {
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) == 0) return;
  // Before Linux 5.9: each open descriptor from /proc.
  std::vector<int> open;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    const int fd = std::atoi(it->path().filename().c_str());
    if (fd > 2) open.push_back(fd);
  }
  for (int fd : open) ::close(fd);  // EBADF for the iterator's own descriptor, closed already
}

}  // namespace

int main(int argc, char** argv) {
  // The job secret arrives on stdin: from the start, no core dump and no /proc/PID/{mem,environ,fd} or
  // ptrace for other processes of the user (root only). A rank gets it back with its exec.
  if (::prctl(PR_SET_DUMPABLE, 0) != 0) {
    std::cerr << "hvrun-agent: prctl(PR_SET_DUMPABLE, 0): " << std::strerror(errno) << "\n";
    return 1;
  }
  close_inherited_descriptors();
  // The name ps and pgrep show: started by the check script as /proc/self/fd/3, the kernel named it "3".
  // Cosmetic: a failure (none is documented for PR_SET_NAME) leaves the kernel's name.
  (void)::prctl(PR_SET_NAME, "hvrun-agent", 0, 0, 0);
  if (argc > 1 && (std::strcmp(argv[1], "--version") == 0)) {
    std::cout << "hvrun-agent " << hvrun::kVersion << "\n";
    return 0;
  }
  if (argc > 1) {
    std::cerr << "hvrun-agent: started by hvrun, not by hand (unexpected argument '" << argv[1] << "')\n";
    return 2;
  }
  // The agent's own messages go to stderr, each "hvrun-agent: " + text (common/log.hpp), at info and
  // above: stdout carries the protocol (and, once duplicated away below, the ranks' output).
  hvrun::init_log("hvrun-agent: ");
  hvrun::set_log_threshold(hvrun::LogLevel::info, hvrun::all_log_subsystems());
  // The agent needs OpenSSL only for HMAC-SHA256 and SHA-256: no config file, no error strings, no
  // cipher and digest tables (they cost more resident memory than the rest of the agent), and no
  // OPENSSL_cleanup at exit, which freed its tables one by one just before the kernel drops them all.
  if (OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS |
                              OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS |
                              OPENSSL_INIT_NO_ATEXIT,
                          nullptr) != 1) {
    std::cerr << "hvrun-agent: OPENSSL_init_crypto failed\n";
    return 1;
  }
  // Its listeners take connections from anyone on the network (bounded per listener to a quarter of the
  // limit, common/stranger_gate.hpp): raise the soft limit to the hard one, before any thread starts.
  // Ranks get the original back (spawn_rank).
  hvrun::raise_open_files_limit();
  try {
    // Duplicate stdin/stdout for the channel and point the originals at safe places, so nothing
    // else the agent links can write into the protocol stream.
    hvrun::UniqueFd in(::fcntl(0, F_DUPFD_CLOEXEC, 3));
    hvrun::UniqueFd out(::fcntl(1, F_DUPFD_CLOEXEC, 3));
    if (!in || !out) hvrun::throw_errno("fcntl(F_DUPFD_CLOEXEC)", "control channel");
    if (::dup2(2, 1) < 0) hvrun::throw_errno("dup2", "stdout to stderr");
    hvrun::Agent agent(std::move(in), std::move(out));
    return agent.run();
  } catch (const std::exception& e) {
    std::cerr << "hvrun-agent: " << hvrun::user_message(e, "serving hvrun") << "\n";
    return 1;
  }
}
