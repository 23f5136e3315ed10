#pragma once
// The probe cache: what a launch's probe round chose, kept so that the next launch on the same hosts,
// NICs and flags skips the round (docs/DESIGN.md §5.5). horovodrun keeps its NIC checks for 60 minutes
// keyed on its command line (--disable-cache turns that off); this cache keeps them as long, keyed on
// everything the round's outcome depends on that the hosts report: each host's network stack (boot id
// and network namespace), hostname and every interface with its addresses, state, speed and master,
// and the flags that shape the round. A NIC that changed in any of those is probed again; one that
// began to drop packets without changing is not, so a job whose NICs came from here and that fails
// drops its entry (forget): the next launch probes again.
//
// One file per key under dir(), mode 0600 in a 0700 directory, written whole and renamed into place: two
// launchers writing one key leave one complete entry. A directory that is another user's, or that others
// can write in, is not used at all (a warning says why: common/checked_directory.hpp's rule), and an
// entry file that is not the user's own or that others can write is a miss: an entry chooses the NICs
// ranks talk over, so one planted by someone else must never be read. Reading never throws: an unreadable, corrupt, stale
// or mismatched entry is a miss. Writing and forgetting warn once on failure and go on: the cache only
// saves time.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/checked_directory.hpp"
#include "launcher/nic/nic_selector.hpp"

namespace hvrun {

// One host's part of a cached round: the NIC chosen and every NIC found usable (an -x NCCL_SOCKET_IFNAME
// is checked against those, rank_launch.cpp).
struct CachedSelection {
  NicChoice selected;
  std::vector<NicChoice> usable;  // iface and address of each usable NIC, in the kernel's order
  bool operator==(const CachedSelection&) const = default;
};

class NicCache {
 public:
  using Clock = std::chrono::system_clock;
  // horovodrun's CACHE_STALENESS_THRESHOLD_MINUTES.
  static constexpr std::chrono::minutes kMaxAge{60};

  // `dir`: where the entries live (created on the first store).
  explicit NicCache(std::string dir);

  // $XDG_CACHE_HOME/hvrun/nics, else $HOME/.cache/hvrun/nics; nullopt when neither is set (then there
  // is no cache).
  static std::optional<std::string> default_dir();

  // What a round's outcome depends on, as a key (hex SHA-256). `stacks` parallel to `inventories`
  // (HelloMsg::network_stack); `filter`: --network-interface's values as given.
  static std::string key(const std::vector<HostInventory>& inventories, const std::vector<std::string>& stacks,
                         const std::vector<std::string>& filter, std::size_t peers, bool single_host);

  struct Entry {
    std::vector<CachedSelection> selections;  // one per member, in member order
    Clock::time_point made;
  };
  // The entry of `key` when it holds `members` selections and was made within kMaxAge of `now` (and not
  // after it); else nullopt.
  std::optional<Entry> load(const std::string& key, std::size_t members, Clock::time_point now) const;
  // Writes `selections` as the entry of `key`, made `now`.
  void store(const std::string& key, const std::vector<CachedSelection>& selections, Clock::time_point now) const;
  // Removes the entry of `key`, if there is one.
  void forget(const std::string& key) const;

  const std::string& dir() const { return dir_; }
  // Why the last load, store or forget did not use dir() ("" when it did, or when nothing is there yet).
  const std::string& refusal() const { return refusal_; }

 private:
  std::string dir_;
  mutable std::string refusal_;
  // dir(), checked (made with `create`); nullopt when missing or refused (refusal_, warned).
  std::optional<CheckedDirectory> directory(bool create) const;
  std::string path_of(const std::string& key) const;
};

}  // namespace hvrun
