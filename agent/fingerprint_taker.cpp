#include "agent/fingerprint_taker.hpp"

#include <signal.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <list>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/byte_tail.hpp"
#include "common/child_process.hpp"
#include "common/io_sizes.hpp"

namespace hvrun {

namespace asio = boost::asio;
using Descriptor = asio::posix::stream_descriptor;

namespace {

// How often a child's end is looked for where the kernel has no pidfd (before 5.3).
constexpr std::chrono::milliseconds kEndPoll{20};

}  // namespace

// Outside the anonymous namespace: FingerprintTaker::Impl holds it (GCC's -Wsubobject-linkage in a
// unity build), so its name is unique in the project.
// One fingerprint under way. Its interpreter's handle stays here until the child is reaped, also when
// the answer went without it (the deadline).
struct FingerprintQuery {
  FingerprintQuery(asio::io_context& io, FingerprintRequestMsg r, FingerprintTaker::Done d, FingerprintTaker::Failed f)
      : request(std::move(r)), done(std::move(d)), failed(std::move(f)), deadline(io), end_poll(io) {}

  FingerprintRequestMsg request;
  FingerprintTaker::Done done;
  FingerprintTaker::Failed failed;
  FingerprintMsg msg;
  std::optional<Child> interpreter;
  std::unique_ptr<Descriptor> out;  // the interpreter's stdout
  std::unique_ptr<Descriptor> end;  // its pidfd; null where there is none (end_poll looks instead)
  asio::steady_timer deadline, end_poll;
  ByteTail tail{kInterpreterOutputLimit};
  std::vector<char> buffer = std::vector<char>(kIoChunk);
  bool out_ended = false;
  bool answered = false;
};

struct FingerprintTaker::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& i, FingerprintRoots r) : io(i), roots(std::move(r)) {}

  asio::io_context& io;
  const FingerprintRoots roots;
  // One thread per piece of work, which ends with it: an idle thread waiting for more would have to be
  // woken and scheduled for the agent to exit, and at the end of a large job every agent on a busy host
  // exits at once (32 lab hosts on 2 cores: 30 ms longer teardowns, docs/BENCHMARKS.md). A finished
  // thread is joined when the next one starts, or by the destructor.
  struct Worker {
    std::shared_ptr<std::atomic<bool>> finished = std::make_shared<std::atomic<bool>>(false);
    std::jthread thread;
  };
  std::list<Worker> workers;
  std::set<std::shared_ptr<FingerprintQuery>> queries;

  template <typename Task>
  void start_worker(Task task) {
    std::erase_if(workers, [](const Worker& w) { return w.finished->load(); });  // their threads are joined
    Worker& w = workers.emplace_back();
    w.thread = std::jthread([task = std::move(task), finished = w.finished]() mutable {
      task();
      finished->store(true);
    });
  }

  // Runs `work` on the worker, then `then` with its result on the loop, unless the taker has gone
  // meanwhile; an exception from `work` fails the query. The worker keeps no hold on the query after
  // (the loop alone destroys it, with its I/O objects).
  template <typename Work, typename Then>
  void off_loop(std::shared_ptr<FingerprintQuery> q, Work work, Then then) {
    auto run = [self = weak_from_this(), q = std::move(q), work = std::move(work), then = std::move(then)]() mutable {
      std::optional<decltype(work(*q))> result;
      std::string error;
      try {
        result.emplace(work(*q));
      } catch (const std::exception& e) {
        error = e.what();
      }
      const auto alive = self.lock();
      if (!alive) return;
      asio::post(alive->io, [self, q = std::move(q), then = std::move(then), result = std::move(result),
                             error]() mutable {
        const auto taker = self.lock();
        if (!taker) return;
        if (result) return then(q, std::move(*result));
        taker->fail(q, error);
      });
    };
    start_worker(std::move(run));
  }

  void take(FingerprintRequestMsg request, Done done, Failed failed) {
    auto q = std::make_shared<FingerprintQuery>(io, std::move(request), std::move(done), std::move(failed));
    queries.insert(q);
    off_loop(
        q, [this](FingerprintQuery& query) { return fingerprint_files(query.request, roots); },
        [this](const std::shared_ptr<FingerprintQuery>& query, FingerprintFiles files) {
          on_files(query, std::move(files));
        });
  }

  void on_files(const std::shared_ptr<FingerprintQuery>& q, FingerprintFiles files) {
    q->msg = std::move(files.msg);
    if (!files.interpreter) return answer(q);
    try {
      q->interpreter = Child::start(*files.interpreter);  // returns once it has executed (vfork-style)
    } catch (const Error&) {
      return answer(q);
    }
    q->out = std::make_unique<Descriptor>(io, q->interpreter->take_stream(1).release());
    if (UniqueFd pidfd = q->interpreter->end_descriptor()) q->end = std::make_unique<Descriptor>(io, pidfd.release());
    q->deadline.expires_after(kInterpreterTimeout);
    q->deadline.async_wait([this, q](auto ec) {
      if (ec || q->answered) return;
      try {
        q->interpreter->signal(SIGKILL);  // its group; the handle reaps it when it has ended
      } catch (const Error&) {
        // Only EPERM, which our own child cannot give; its end is awaited all the same.
      }
      answer(q);
    });
    read(q);
    watch_end(q);
  }

  void read(const std::shared_ptr<FingerprintQuery>& q) {
    q->out->async_read_some(asio::buffer(q->buffer), [this, q](auto ec, std::size_t n) {
      if (q->answered) return;
      if (!ec) {
        q->tail.append(std::string_view(q->buffer.data(), n));
        return read(q);
      }
      q->out_ended = true;  // end of stream, or an error no retry mends
      interpreter_progress(q);
    });
  }

  void watch_end(const std::shared_ptr<FingerprintQuery>& q) {
    auto look = [this, q](auto ec) {
      if (ec) return;
      if (!q->interpreter->try_wait()) return watch_end(q);
      interpreter_progress(q);
    };
    if (q->end) return q->end->async_wait(Descriptor::wait_read, look);
    q->end_poll.expires_after(kEndPoll);
    q->end_poll.async_wait(look);
  }

  // Once the interpreter has closed its stdout and been reaped: the answer, with what it said when it
  // exited with 0. The query goes once it is answered and its child reaped.
  void interpreter_progress(const std::shared_ptr<FingerprintQuery>& q) {
    const std::optional<ExitStatus> status = q->interpreter->try_wait();
    if (status && q->answered) return forget(q);
    if (!status || !q->out_ended || q->answered) return;
    q->deadline.cancel();
    if (status->code != 0) return answer(q);
    q->answered = true;  // the deadline no longer applies: what remains reads files
    off_loop(
        q,
        [](FingerprintQuery& query) {
          add_interpreter_answer(query.msg, query.tail.text(), query.request.cwd);
          return 0;
        },
        [this](const std::shared_ptr<FingerprintQuery>& query, int) {
          query->done(std::move(query->msg));
          forget(query);
        });
  }

  void answer(const std::shared_ptr<FingerprintQuery>& q) {
    if (q->answered) return;
    q->answered = true;
    q->deadline.cancel();
    q->done(std::move(q->msg));
    if (!q->interpreter || q->interpreter->try_wait()) forget(q);
  }

  void fail(const std::shared_ptr<FingerprintQuery>& q, const std::string& error) {
    q->answered = true;
    q->deadline.cancel();
    q->failed(error);
    if (!q->interpreter || q->interpreter->try_wait()) forget(q);
  }

  void forget(const std::shared_ptr<FingerprintQuery>& q) {
    boost::system::error_code ignored;
    if (q->out) q->out->close(ignored);
    if (q->end) q->end->close(ignored);
    q->end_poll.cancel();
    queries.erase(q);
  }

  ~Impl() {
    for (const auto& q : queries)
      if (q->interpreter) q->interpreter->kill_without_waiting();
  }
};

FingerprintTaker::FingerprintTaker(asio::io_context& io, FingerprintRoots roots)
    : impl_(std::make_shared<Impl>(io, std::move(roots))) {}

FingerprintTaker::~FingerprintTaker() {
  // The workers first: once joined, nothing of them touches the queries.
  impl_->workers.clear();
}

void FingerprintTaker::take(FingerprintRequestMsg request, Done done, Failed failed) {
  impl_->take(std::move(request), std::move(done), std::move(failed));
}

}  // namespace hvrun
