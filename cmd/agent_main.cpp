// hvrun-agent: started by hvrun (over SSH, or over pipes on the launcher's own host). It speaks the
// framed protocol on stdin/stdout; a human has no reason to run it by hand.
#include <sys/prctl.h>
#include <signal.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <openssl/crypto.h>

#include "agent/agent.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/open_files_limit.hpp"
#include "common/user_message.hpp"
#include "hvrun/version.hpp"

int main(int argc, char** argv) {
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
