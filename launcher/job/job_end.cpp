#include "launcher/job/job_end.hpp"

#include <spdlog/spdlog.h>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/post.hpp>

#include "common/control_message.hpp"
#include "launcher/job/job_timeouts.hpp"

namespace hvrun {

JobEnd::JobEnd(boost::asio::io_context& io, Job job, Hooks hooks)
    : io_(io), job_(job), hooks_(std::move(hooks)), deadline_(io) {}

void JobEnd::arm_deadline(std::chrono::milliseconds after, std::function<void()> on_expiry) {
  deadline_.expires_after(after);
  deadline_.async_wait([on_expiry = std::move(on_expiry)](auto ec) {
    if (!ec) on_expiry();
  });
}

void JobEnd::carry_out(const Teardown::Decision& d, const std::string& line) {
  if (d.report) {
    hooks_.clear_status();
    spdlog::error("{}", line);
  }
  if (d.action == Teardown::Action::kShutDown) shut_down();
  if (d.action == Teardown::Action::kAutopsy) hooks_.start_autopsy(d.grace);
  if (d.action == Teardown::Action::kStopRanks) {
    // A second signal during the autopsy: the stacks that came are not waited for.
    job_.autopsy.cancel();
    stop_ranks(d.grace);
  }
}

void JobEnd::stop_ranks(std::chrono::milliseconds grace) {
  if (!job_.teardown.stop_ranks()) return;
  job_.links->send_all(TerminateMsg{static_cast<int>(grace.count()), {}});
  arm_deadline(grace + kAfterKillSlack, [this] {
    spdlog::warn("some agents did not confirm that their ranks ended; closing their channels");
    shut_down();
  });
}

void JobEnd::shut_down() {
  if (!job_.teardown.shut_down()) return;
  job_.links->send_all(ShutdownMsg{});
  // A host still connecting is abandoned: its agent, if it comes, is dropped on arrival.
  job_.links->abandon_unattached();
  arm_deadline(kShutdownTimeout, [this] { finish(); });
  maybe_done();
}

void JobEnd::maybe_done() {
  if (job_.links->all_closed()) finish();
}

void JobEnd::finish() {
  job_.teardown.finish();
  job_.stall_timer.cancel();
  if (job_.sync) job_.sync->stop();
  job_.autopsy.cancel();
  job_.links->close_all();
  hooks_.stop_status();
  deadline_.cancel();
  // Everything the ranks printed is written before hvrun exits, however slowly stdout is read; a
  // signal meanwhile (Job::Impl::on_signal) gives up on it.
  job_.output->notify_when_empty([this] { boost::asio::post(io_, [this] { io_.stop(); }); });
}

}  // namespace hvrun
