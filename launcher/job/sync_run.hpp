#pragma once
// --sync for either driver, the fixed job and the Horovod elastic one (where each newcomer gets the files
// before its first worker): a host's check (SyncCheckMsg, sent by the driver), its copies (FileSender),
// the progress line while copies run, and the summary once no host is being checked or copied. The host
// moves through HostPhase::kSyncChecking and kSyncing in its HostLife; the driver asks for its
// fingerprint once it is synced (Hooks::synced).
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/output/status_line.hpp"
#include "launcher/start/file_sender.hpp"
#include "launcher/start/job_host.hpp"
#include "launcher/start/sync_manifest.hpp"

namespace hvrun {

class SyncRun {
 public:
  struct Hooks {
    // hosts[i] holds every file (or, under --check-only, has said which it lacks); its HostLife moved on.
    std::function<void(std::size_t)> synced;
    // hosts[i]'s copies failed: the line that says so (the host and the file).
    std::function<void(std::size_t, const std::string&)> failed;
    // The job is ending: nothing more is copied or reported.
    std::function<bool()> stopping;
    // Whether the progress line may be drawn now (not while the agents' start-up status line is).
    std::function<bool()> may_draw;
  };

  // `hosts` must outlive this object (it may grow). `start_timeout` bounds each host's copies with
  // sync_timeout; `wants_fingerprint`: the job has a command, so a synced host is fingerprinted next.
  SyncRun(boost::asio::io_context& io, SyncManifest manifest, std::vector<JobHost>& hosts,
          std::chrono::milliseconds start_timeout, bool check_only, bool wants_fingerprint, Hooks hooks);
  ~SyncRun();
  SyncRun(const SyncRun&) = delete;
  SyncRun& operator=(const SyncRun&) = delete;

  const SyncManifest& manifest() const { return manifest_; }
  // Whether `h` gets the files: a host other than this machine (their source), when there are any.
  bool needs(const JobHost& h) const { return !manifest_.files.empty() && !h.is_local; }
  // What to ask a host that needs them, once ready.
  SyncCheckMsg check() const { return SyncCheckMsg{manifest_.files}; }
  // hosts[i]'s answer: what it lacks is copied (or, under --check-only, only counted). Out of turn, or
  // with a bad index, a ProtocolError naming `peer`.
  void need(std::size_t i, const SyncNeedMsg& m, const std::string& peer);
  // No more redraws; the progress line is cleared.
  void stop();

 private:
  void on_sent(std::size_t i, const std::string& error);
  void synced(std::size_t i);
  void maybe_report();
  void show_progress();

  boost::asio::io_context& io_;
  SyncManifest manifest_;
  std::vector<JobHost>& hosts_;
  std::chrono::milliseconds start_timeout_;
  bool check_only_, wants_fingerprint_;
  Hooks hooks_;
  boost::asio::steady_timer timer_;  // redraws status_ while copies are under way
  std::unique_ptr<StatusLine> status_;
  std::vector<bool> reported_;         // hosts in a summary already, parallel to hosts_ (grown on use)
  std::unique_ptr<FileSender> sender_;  // from the first host that lacks a file on; last: its results stop first
};

}  // namespace hvrun
