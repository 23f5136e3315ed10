#pragma once
// Owns one file descriptor; closes it exactly once.
#include <utility>

namespace hvrun {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// A pipe whose both ends are close-on-exec; throws SystemError naming `what`.
struct Pipe {
  UniqueFd read, write;
};
Pipe make_pipe(const char* what);

// A connected AF_UNIX stream socketpair, both ends close-on-exec.
std::pair<UniqueFd, UniqueFd> make_socketpair(const char* what);

void set_nonblocking(int fd, const char* what);

}  // namespace hvrun
