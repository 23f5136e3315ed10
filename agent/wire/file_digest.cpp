#include "agent/wire/file_digest.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <openssl/evp.h>
#include <string_view>

#include "agent/wire/error.hpp"
#include "agent/wire/io_sizes.hpp"
#include "agent/wire/job_secret.hpp"
#include "agent/wire/unique_fd.hpp"

namespace hvrun {

std::string sha256_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw_errno("open", path);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw Error("EVP_DigestInit_ex failed");
  char buf[kIoChunk];
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

}  // namespace hvrun
