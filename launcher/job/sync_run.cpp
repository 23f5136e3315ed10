#include "launcher/job/sync_run.hpp"

#include <algorithm>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "launcher/start/host_life.hpp"

namespace hvrun {

namespace {

// Hosts whose files are copied at once, and how often the progress line is redrawn.
constexpr std::size_t kSyncConcurrency = 16;
constexpr std::chrono::milliseconds kSyncProgressPeriod{250};

}  // namespace

SyncRun::SyncRun(boost::asio::io_context& io, SyncManifest manifest, std::vector<JobHost>& hosts,
                 std::chrono::milliseconds start_timeout, bool check_only, bool wants_fingerprint, Hooks hooks)
    : io_(io),
      manifest_(std::move(manifest)),
      hosts_(hosts),
      start_timeout_(start_timeout),
      check_only_(check_only),
      wants_fingerprint_(wants_fingerprint),
      hooks_(std::move(hooks)),
      timer_(io) {}

SyncRun::~SyncRun() = default;

void SyncRun::need(std::size_t i, const SyncNeedMsg& m, const std::string& peer) {
  JobHost& h = hosts_.at(i);
  if (h.life.phase() != HostPhase::kSyncChecking) throw ProtocolError(peer + ": sync need out of turn");
  std::vector<FileCopy> copies = sync_copies(manifest_, m.need, peer);
  h.sync_checked = true;
  h.sync_files = copies.size();
  for (int k : m.need) h.sync_bytes += manifest_.sizes[static_cast<std::size_t>(k)];  // indexes checked by sync_copies
  if (copies.empty() || check_only_ || hooks_.stopping()) return synced(i);
  h.life.start_copy();
  if (!sender_)
    sender_ = std::make_unique<FileSender>(io_, kSyncConcurrency, [this](std::size_t k, const std::string& error) {
      on_sent(k, error);
    });
  sender_->send(i, h.remote, std::move(copies), sync_timeout(h.sync_bytes, start_timeout_));
  show_progress();
}

void SyncRun::on_sent(std::size_t i, const std::string& error) {
  if (hooks_.stopping() || hosts_.at(i).life.phase() != HostPhase::kSyncing) return;  // lost meanwhile
  if (!error.empty()) return hooks_.failed(i, "--sync: " + error);
  synced(i);
}

void SyncRun::synced(std::size_t i) {
  hosts_.at(i).life.synced(wants_fingerprint_);
  if (hooks_.stopping()) return;
  maybe_report();
  hooks_.synced(i);
}

void SyncRun::stop() {
  timer_.cancel();
  if (status_) status_->clear();
}

// Once no host is being checked or copied and none that will be is still starting: the hosts checked
// since the last summary, in one line.
void SyncRun::maybe_report() {
  if (std::any_of(hosts_.begin(), hosts_.end(), [this](const JobHost& h) {
        return h.life.syncing() || (needs(h) && !h.life.ready() && !h.life.ended());
      }))
    return;
  reported_.resize(hosts_.size(), false);
  std::vector<HostSync> checked;
  for (std::size_t i = 0; i < hosts_.size(); ++i)
    if (hosts_[i].sync_checked && !reported_[i]) {
      reported_[i] = true;
      checked.push_back({hosts_[i].name, hosts_[i].sync_files, hosts_[i].sync_bytes});
    }
  stop();
  if (!checked.empty()) spdlog::warn("{}", sync_summary(manifest_, checked, check_only_));
}

// While copies are under way: "--sync: 12582912 bytes (12.0 MiB) of 41943040 bytes (40.0 MiB) sent,
// 3 of 8 hosts done", once the agents' own status line is gone.
void SyncRun::show_progress() {
  if (hooks_.stopping() ||
      std::none_of(hosts_.begin(), hosts_.end(), [](const JobHost& h) { return h.life.phase() == HostPhase::kSyncing; }))
    return;
  if (hooks_.may_draw()) {
    if (!status_) status_ = std::make_unique<StatusLine>(2);
    std::uint64_t total = 0;
    std::size_t lacking = 0, done = 0;
    for (const JobHost& h : hosts_)
      if (h.sync_checked && h.sync_files > 0) {
        total += h.sync_bytes;
        ++lacking;
        done += h.life.phase() == HostPhase::kSyncing ? 0 : 1;
      }
    status_->show("--sync: " + byte_count_text(sender_ ? sender_->bytes_sent() : 0) + " of " + byte_count_text(total) +
                  " sent, " + std::to_string(done) + " of " + std::to_string(lacking) +
                  (lacking == 1 ? " host done" : " hosts done"));
  }
  timer_.expires_after(kSyncProgressPeriod);
  timer_.async_wait([this](auto ec) {
    if (!ec) show_progress();
  });
}

}  // namespace hvrun
