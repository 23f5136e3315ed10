// rss_floor — the memory floor of an agent, for scripts/bench.sh.
//
// The least a C++ program that does what every hvrun agent must do (random bytes for a nonce, from the
// kernel's getrandom as the agent takes them; one OpenSSL HMAC-SHA256 to answer a challenge) holds in
// memory: libstdc++, libc and libcrypto mapped, OpenSSL 3's default provider initialised. Prints its own peak RSS and the anonymous part
// (kB), read from /proc/self/status, so an agent's figure can be told apart from the libraries'.
//
//   rss_floor            -> vmhwm_kb=... rss_anon_kb=... rss_file_kb=...
//
// Build: g++ -std=c++20 -O2 rss_floor.cpp -o rss_floor -lcrypto
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

namespace {

// The value (kB) of one "Name:   N kB" line of /proc/self/status, or -1.
long status_kb(const std::string& name) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(name + ":", 0) == 0) return std::stol(line.substr(name.size() + 1));
  return -1;
}

}  // namespace

int main() {
  unsigned char key[32];
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (getrandom(key, sizeof key, 0) != static_cast<ssize_t>(sizeof key)) {
    std::perror("rss_floor: getrandom");
    return 1;
  }
  if (HMAC(EVP_sha256(), key, sizeof key, key, sizeof key, mac, &len) == nullptr) {
    std::fprintf(stderr, "rss_floor: HMAC failed\n");
    return 1;
  }
  std::cout << "vmhwm_kb=" << status_kb("VmHWM") << " rss_anon_kb=" << status_kb("RssAnon")
            << " rss_file_kb=" << status_kb("RssFile") << "\n";
  return 0;
}
