#pragma once
// The NIC discovery of a job: one probe round (probe_round.hpp) driven over the agents' channels. It
// sends each prober its probes, takes the results, judges once per burst of results, probes again what
// timed out (probe_retry.hpp), and says when the choice is final. The job keeps one deadline for all
// its phases: this class arms and cancels it through Hooks, so the probe deadline replaces the start
// timeout and is replaced in turn by whatever the job arms next (the shutdown's, say).
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/io_context.hpp>

#include "common/control_message.hpp"
#include "launcher/check/check_input.hpp"
#include "launcher/cli/launch_options.hpp"
#include "launcher/nic/nic_cache.hpp"
#include "launcher/nic/nic_filter.hpp"
#include "launcher/nic/probe_round.hpp"
#include "launcher/start/job_host.hpp"

namespace hvrun {

class NicDiscovery {
 public:
  using Clock = std::chrono::steady_clock;

  struct Hooks {
    // Whether the job is still probing; results, deadlines and judgements after that are dropped.
    std::function<bool()> probing;
    // The job's single deadline: arm replaces whatever it was armed for.
    std::function<void(std::chrono::milliseconds, std::function<void()>)> arm_deadline;
    std::function<void()> cancel_deadline;
    // Sends the agent of hosts[i] its probes.
    std::function<void(std::size_t, const ProbeRequestMsg&)> send;
    // The choice is final (decided_at(), choice_of(), all_chosen()); called once.
    std::function<void()> decided;
  };

  // `hosts`: the job's, read as they are when each call comes (it must outlive this object). `cache`: the
  // probe cache to take the round's outcome from and to keep it in (nic_cache.hpp; --check-only only
  // drops the entry a launch would take); nullopt: probe every time (--disable-cache, elastic rounds).
  NicDiscovery(boost::asio::io_context& io, const LaunchOptions& options, const std::vector<JobHost>& hosts,
               NicFilter filter, Hooks hooks, std::optional<NicCache> cache = std::nullopt);
  // May come while a deadline or a judgement of this round is still queued in `io`; those do nothing then.
  ~NicDiscovery();
  NicDiscovery(const NicDiscovery&) = delete;
  NicDiscovery& operator=(const NicDiscovery&) = delete;

  // Plans the round over the hosts with an agent and sends the first probes (decides at once when
  // there is nothing to probe, or when the cache holds this round's outcome). Throws UsageError when --network-interface names a NIC some host lacks;
  // then nothing was sent.
  void start();
  // A ProbeResultMsg from the agent of hosts[from] (`peer` in messages); throws ProtocolError as
  // probe_result does. Call only while probing.
  void add(std::size_t from, const ProbeResultMsg& m, const std::string& peer);
  // Judges what has arrived: probes again what timed out, or ends the round (Hooks::decided). The probe
  // deadline calls this too.
  void decide();

  // When the choice came from the probe cache: when that entry was made; else nullopt.
  std::optional<NicCache::Clock::time_point> cached_at() const;
  // Drops this round's cache entry (a job that failed), so that the next launch probes again.
  void forget_cached() const;

  // The round, from start() on; null before.
  const ProbeRound* round() const;
  // The selection of hosts[i] (a host without an agent has none).
  std::optional<NicChoice> choice_of(std::size_t i) const;
  bool all_chosen() const;
  Clock::time_point decided_at() const;
  // The round's job-wide facts (probe time, filter, single host) for a report of it: the check room's
  // check_report_of adds the hosts and renders it.
  CheckInput report_base() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun
