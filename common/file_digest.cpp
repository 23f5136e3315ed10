#include "common/file_digest.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <openssl/evp.h>
#include <string_view>

#include "common/error.hpp"
#include "common/job_secret.hpp"
#include "common/unique_fd.hpp"

namespace hvrun {

std::string sha256_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno("open", path);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw Error("EVP_DigestInit_ex failed");
  // A 16 KiB chunk: the stack pages of a larger one are faults of their own on each agent's first hash.
  char buf[16 * 1024];
  for (;;) {
    const ssize_t n = retry_eintr([&] { return ::read(fd.get(), buf, sizeof buf); });
    if (n < 0) throw_errno("read", path);
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buf, static_cast<size_t>(n));
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  return hex_encode(std::string_view(reinterpret_cast<const char*>(md), len));
}

std::string read_file_head(const std::string& path, std::size_t limit) {
  const UniqueFd fd(retry_eintr([&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC); }));
  std::string text;
  if (!fd) return text;
  char buf[4096];
  while (text.size() < limit) {
    const ssize_t n = retry_eintr([&] { return ::read(fd.get(), buf, std::min(sizeof buf, limit - text.size())); });
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace hvrun
