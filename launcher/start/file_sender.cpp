#include "launcher/start/file_sender.hpp"

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <thread>

#include "common/user_message.hpp"

namespace hvrun {

// Shared by the FileSender and its threads; `io` and `on_sent` are used only while `open`.
struct FileSender::Mailbox {
  struct Job {
    std::size_t index = 0;
    std::shared_ptr<HostAgent> agent;
    std::vector<FileCopy> files;
    std::chrono::milliseconds timeout{0};
  };
  std::mutex mutex;
  bool open = true;
  boost::asio::io_context* io = nullptr;
  OnSent on_sent;
  std::size_t concurrency = 1;
  std::deque<Job> queue;
  std::size_t threads = 0;
  std::atomic<std::uint64_t> bytes{0};

  void deliver(const std::shared_ptr<Mailbox>& self, std::size_t index, std::string error) {
    std::lock_guard lock(mutex);
    if (!open) return;
    boost::asio::post(*io, [self, index, error = std::move(error)] {
      OnSent callback;
      {
        std::lock_guard lock(self->mutex);
        if (!self->open) return;
        callback = self->on_sent;
      }
      callback(index, error);
    });
  }

  // A sending thread: takes hosts from the queue until it is empty or the mailbox closed.
  static void work(const std::shared_ptr<Mailbox>& self) {
    for (;;) {
      Job job;
      {
        std::lock_guard lock(self->mutex);
        if (!self->open || self->queue.empty()) {
          --self->threads;
          return;
        }
        job = std::move(self->queue.front());
        self->queue.pop_front();
      }
      std::string error;
      try {
        job.agent->copy_files(job.files, job.timeout, [&self](std::uint64_t n) { self->bytes += n; });
      } catch (const std::exception& e) {
        error = user_message(e, "copying --sync files");
      }
      self->deliver(self, job.index, std::move(error));
    }
  }
};

FileSender::FileSender(boost::asio::io_context& io, std::size_t concurrency, OnSent on_sent)
    : mailbox_(std::make_shared<Mailbox>()) {
  mailbox_->io = &io;
  mailbox_->on_sent = std::move(on_sent);
  mailbox_->concurrency = std::max<std::size_t>(concurrency, 1);
}

FileSender::~FileSender() {
  std::lock_guard lock(mailbox_->mutex);
  mailbox_->open = false;
  mailbox_->queue.clear();
}

void FileSender::send(std::size_t index, std::shared_ptr<HostAgent> agent, std::vector<FileCopy> files,
                      std::chrono::milliseconds timeout) {
  std::lock_guard lock(mailbox_->mutex);
  mailbox_->queue.push_back({index, std::move(agent), std::move(files), timeout});
  if (mailbox_->threads >= mailbox_->concurrency) return;
  ++mailbox_->threads;
  try {
    std::thread([self = mailbox_] { Mailbox::work(self); }).detach();
  } catch (...) {
    --mailbox_->threads;  // the queued host waits for a thread already running, if any
    if (mailbox_->threads == 0) throw;
  }
}

std::uint64_t FileSender::bytes_sent() const { return mailbox_->bytes.load(); }

}  // namespace hvrun
