#include "launcher/job/hang_autopsy.hpp"

#include <algorithm>

#include "common/duration_text.hpp"
#include "common/log.hpp"
#include "launcher/job/job_timeouts.hpp"

namespace hvrun {

HangAutopsy::HangAutopsy(boost::asio::io_context& io, Hooks hooks) : timer_(io), hooks_(std::move(hooks)) {}

void HangAutopsy::start(std::vector<std::string> names, std::vector<std::string> silent, int running,
                        std::chrono::milliseconds grace) {
  State s{std::move(names), std::move(silent), {}, {}, grace, running};
  s.awaited.assign(s.silent.size(), false);
  for (std::size_t i = 0; i < s.silent.size(); ++i) s.awaited[i] = !s.silent[i].empty();
  state_ = std::move(s);
  for (std::size_t i = 0; i < state_->awaited.size(); ++i)
    if (state_->awaited[i]) hooks_.ask(i);
  timer_.expires_after(kAutopsyTimeout);
  timer_.async_wait([this](auto ec) {
    if (!ec) end();
  });
  maybe_end();
}

void HangAutopsy::stacks(std::size_t i, StacksMsg m, const std::function<void(int)>& check_rank) {
  if (!state_ || i >= state_->awaited.size() || !state_->awaited[i]) return;  // late, or after the autopsy ended
  for (RankStack& r : m.ranks) {
    check_rank(r.rank);
    state_->stacks.push_back(RankStackText{r.rank, state_->names[i], std::move(r.text)});
  }
  state_->awaited[i] = false;
  maybe_end();
}

void HangAutopsy::host_gone(std::size_t i) {
  if (!state_ || i >= state_->awaited.size()) return;
  state_->awaited[i] = false;
  maybe_end();
}

void HangAutopsy::cancel() {
  timer_.cancel();
  state_.reset();
}

void HangAutopsy::maybe_end() {
  if (state_ && std::none_of(state_->awaited.begin(), state_->awaited.end(), [](bool b) { return b; })) end();
}

// Words the stacks grouped (and which hosts did not answer); the driver prints them and stops the ranks.
void HangAutopsy::end() {
  if (!state_) return;
  timer_.cancel();
  State a = std::move(*state_);
  state_.reset();
  std::sort(a.stacks.begin(), a.stacks.end(), [](const auto& x, const auto& y) { return x.rank < y.rank; });
  std::string silent;
  for (std::size_t i = 0; i < a.awaited.size(); ++i)
    if (a.awaited[i]) silent += (silent.empty() ? "" : ", ") + a.silent[i];
  const std::string prefix(kHvrunLogPrefix);
  std::string text = prefix + "where the " + std::to_string(a.running) + " running ranks are:";
  if (!a.stacks.empty()) text += "\n" + stack_groups_report(a.stacks);
  if (!silent.empty()) text += "\n" + prefix + "no stacks from " + silent + " within " + seconds_text(kAutopsyTimeout);
  hooks_.ended(text, a.grace);
}

}  // namespace hvrun
