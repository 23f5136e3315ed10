#pragma once
// A file descriptor with one owner: closed when the owner goes away.
// (Merge candidate: when hvrun_core grows its own fd type, this header should become that one.)
#include <unistd.h>

#include <utility>

namespace hvrun {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

  // Gives up ownership: the caller closes the descriptor.
  int release() noexcept { return std::exchange(fd_, -1); }

  // Closes the descriptor held (if any) and takes `fd`. close(2) errors are ignored: the descriptor is
  // gone either way on Linux, and retrying would close someone else's.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace hvrun
