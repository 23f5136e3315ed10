// One host's life in a job (launcher/start/host_life.hpp): every move, the predicates the drivers ask,
// and every move not in the list refused as hvrun's bug, without a socket.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/invariant.hpp"
#include "launcher/start/host_life.hpp"

using hvrun::HostLife;
using P = hvrun::HostPhase;

namespace {

constexpr std::array<P, HostLife::kPhases> kAll{P::kStarting,       P::kStartFailed, P::kAttached, P::kGreeted,
                                                P::kSyncChecking,   P::kSyncing,     P::kUp,       P::kKnocking,
                                                P::kFingerprinting, P::kAdmitted,    P::kRefused,  P::kLost};

// A life brought to `p` by allowed moves only.
HostLife at(P p) {
  HostLife l;
  const auto greeted = [&] {
    l.attach();
    l.greet();
  };
  switch (p) {
    case P::kStarting: break;
    case P::kStartFailed: l.fail_start(); break;
    case P::kAttached: l.attach(); break;
    case P::kGreeted: greeted(); break;
    case P::kSyncChecking: greeted(); l.ready(true, true); break;
    case P::kSyncing: greeted(); l.ready(true, true); l.start_copy(); break;
    case P::kFingerprinting: greeted(); l.ready(false, true); break;
    case P::kUp: greeted(); l.ready(false, false); break;
    case P::kKnocking: greeted(); l.ready(false, false); l.knock(); break;
    case P::kAdmitted: greeted(); l.ready(false, false); l.knock(); l.admit(); break;
    case P::kRefused: l.fail_start(); l.refuse(); break;
    case P::kLost: l.lose(); break;
  }
  REQUIRE(l.phase() == p);
  return l;
}

// Each move by name, with where it leads (nothing: decided by its arguments, tested apart).
struct Move {
  const char* name;
  std::function<void(HostLife&)> make;
  std::vector<std::pair<P, P>> from_to;
};

const std::vector<Move>& moves() {
  static const std::vector<Move> m{
      {"attach", [](HostLife& l) { l.attach(); }, {{P::kStarting, P::kAttached}}},
      {"fail_start", [](HostLife& l) { l.fail_start(); }, {{P::kStarting, P::kStartFailed}}},
      {"greet", [](HostLife& l) { l.greet(); }, {{P::kAttached, P::kGreeted}}},
      {"ready(sync)", [](HostLife& l) { l.ready(true, true); }, {{P::kGreeted, P::kSyncChecking}}},
      {"ready(fingerprint)", [](HostLife& l) { l.ready(false, true); }, {{P::kGreeted, P::kFingerprinting}}},
      {"ready()", [](HostLife& l) { l.ready(false, false); }, {{P::kGreeted, P::kUp}}},
      {"start_copy", [](HostLife& l) { l.start_copy(); }, {{P::kSyncChecking, P::kSyncing}}},
      {"synced(fingerprint)",
       [](HostLife& l) { l.synced(true); },
       {{P::kSyncChecking, P::kFingerprinting}, {P::kSyncing, P::kFingerprinting}}},
      {"synced()", [](HostLife& l) { l.synced(false); }, {{P::kSyncChecking, P::kUp}, {P::kSyncing, P::kUp}}},
      {"fingerprinted", [](HostLife& l) { l.fingerprinted(); }, {{P::kFingerprinting, P::kUp}}},
      {"knock", [](HostLife& l) { l.knock(); }, {{P::kUp, P::kKnocking}}},
      {"admit", [](HostLife& l) { l.admit(); }, {{P::kKnocking, P::kAdmitted}}},
      {"refuse",
       [](HostLife& l) { l.refuse(); },
       {{P::kStartFailed, P::kRefused}, {P::kSyncing, P::kRefused}, {P::kUp, P::kRefused}, {P::kKnocking, P::kRefused}}},
      {"lose",
       [](HostLife& l) { l.lose(); },
       {{P::kStarting, P::kLost},
        {P::kAttached, P::kLost},
        {P::kGreeted, P::kLost},
        {P::kSyncChecking, P::kLost},
        {P::kSyncing, P::kLost},
        {P::kFingerprinting, P::kLost},
        {P::kUp, P::kLost},
        {P::kKnocking, P::kLost},
        {P::kAdmitted, P::kLost}}},
  };
  return m;
}

}  // namespace

TEST_CASE("host life: every move from every phase goes where the list says, or is refused as a bug",
          "[host_life]") {
  int allowed = 0, refused = 0;
  for (const Move& m : moves())
    for (P from : kAll) {
      INFO(m.name << " from " << HostLife::name(from));
      HostLife l = at(from);
      const auto it = std::find_if(m.from_to.begin(), m.from_to.end(), [&](const auto& ft) { return ft.first == from; });
      if (it != m.from_to.end()) {
        m.make(l);
        CHECK(l.phase() == it->second);
        CHECK(HostLife::allowed(from, it->second));
        ++allowed;
      } else {
        CHECK_THROWS_AS(m.make(l), hvrun::InternalError);
        CHECK(l.phase() == from);  // a refused move changes nothing
        ++refused;
      }
    }
  CHECK(allowed == 27);  // every entry of host_life.cpp's kMoves, each reached by one move
  CHECK(refused == static_cast<int>(moves().size() * HostLife::kPhases) - 27);
}

TEST_CASE("host life: the allowed moves are exactly the list; staying put is none of them", "[host_life]") {
  int n = 0;
  for (P from : kAll)
    for (P to : kAll) {
      const bool listed = std::any_of(moves().begin(), moves().end(), [&](const Move& m) {
        return std::find(m.from_to.begin(), m.from_to.end(), std::pair{from, to}) != m.from_to.end();
      });
      INFO(HostLife::name(from) << " -> " << HostLife::name(to));
      CHECK(HostLife::allowed(from, to) == listed);
      n += listed ? 1 : 0;
    }
  CHECK(n == 27);
}

TEST_CASE("host life: a refused move names both phases", "[host_life]") {
  HostLife l;
  CHECK_THROWS_WITH(l.admit(), Catch::Contains("host life: no move from kStarting to kAdmitted"));
  l.lose();
  CHECK_THROWS_WITH(l.attach(), Catch::Contains("no move from kLost to kAttached"));
  HostLife up = at(P::kUp);
  CHECK_THROWS_WITH(up.synced(false), Catch::Contains("synced in kUp"));
  CHECK_THROWS_WITH(up.ready(false, false), Catch::Contains("ready in kUp"));
}

TEST_CASE("host life: what the drivers ask of each phase", "[host_life]") {
  for (P p : kAll) {
    const HostLife l = at(p);
    INFO(HostLife::name(p));
    CHECK(l.starting() == (p == P::kStarting));
    CHECK(l.start_failed() == (p == P::kStartFailed));
    CHECK(l.ended() == (p == P::kStartFailed || p == P::kRefused || p == P::kLost));
    CHECK(l.greeted() == (p == P::kGreeted || p == P::kSyncChecking || p == P::kSyncing || p == P::kFingerprinting ||
                          p == P::kUp || p == P::kKnocking || p == P::kAdmitted));
    CHECK(l.ready() == (l.greeted() && p != P::kGreeted));
    CHECK(l.syncing() == (p == P::kSyncChecking || p == P::kSyncing));
    CHECK(l.settling() == (l.syncing() || p == P::kFingerprinting));
    CHECK(HostLife::name(p).substr(0, 1) == "k");
  }
}
