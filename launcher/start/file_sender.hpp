#pragma once
// --sync's copies: each host's missing or different files (sync_manifest.hpp) sent over its agent's SSH
// session (HostAgent::copy_files), at most `concurrency` hosts at a time on threads of their own (an SFTP
// write blocks). Each host's outcome reaches the event loop through a mailbox; the threads are detached,
// like the Connector's: one that ends after the FileSender is gone finds the mailbox closed, and its copy
// is bounded by its own timeout.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launcher/ssh/ssh_session.hpp"
#include "launcher/start/host_agent.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

class FileSender {
 public:
  // Runs on the event loop's thread once per send(): `error` is empty when every file is in place, else
  // one line naming the host and the file.
  using OnSent = std::function<void(std::size_t index, const std::string& error)>;

  FileSender(boost::asio::io_context& io, std::size_t concurrency, OnSent on_sent);
  ~FileSender();  // outcomes that arrive later are dropped; queued hosts are not started
  FileSender(const FileSender&) = delete;
  FileSender& operator=(const FileSender&) = delete;

  // Queues host `index`'s copies, all within `timeout`.
  void send(std::size_t index, std::shared_ptr<HostAgent> agent, std::vector<FileCopy> files,
            std::chrono::milliseconds timeout);

  // Bytes in place on their hosts so far, every host together (any thread).
  std::uint64_t bytes_sent() const;

 private:
  struct Mailbox;
  std::shared_ptr<Mailbox> mailbox_;
};

}  // namespace hvrun
