// The probe cache (launcher/nic/nic_cache.hpp): what it keys on, when an entry is read back, what it
// refuses, where it lives and how it is written; and a probe round that adopts a cached outcome.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/invariant.hpp"
#include "launcher/nic/nic_cache.hpp"
#include "launcher/nic/probe_round.hpp"
#include "tests/support/neighbour_user.hpp"
#include "tests/support/nic_lab.hpp"

using hvrun::CachedSelection;
using hvrun::NicCache;
using hvrun::NicChoice;
using hvrun::test::lab_hosts;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

struct TempDir {
  fs::path dir = fs::temp_directory_path() / ("hvrun-nic-cache-" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(dir); }
  ~TempDir() { fs::remove_all(dir); }
};

// An environment variable set (or unset) for one scope, put back as it was afterwards.
struct EnvVar {
  std::string name;
  std::optional<std::string> saved;
  EnvVar(std::string n, const char* value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) saved = v;
    if (value)
      ::setenv(name.c_str(), value, 1);
    else
      ::unsetenv(name.c_str());
  }
  ~EnvVar() {
    if (saved)
      ::setenv(name.c_str(), saved->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

std::vector<CachedSelection> selections_of(std::size_t n) {
  std::vector<CachedSelection> out;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string addr = "10.77.0." + std::to_string(10 + i);
    out.push_back({NicChoice{hvrun::test::fabric_name(i), addr, "the only usable NIC"},
                   {NicChoice{hvrun::test::fabric_name(i), addr, ""}}});
  }
  return out;
}

std::vector<std::string> stacks_of(std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back("boot/net:4:" + std::to_string(4026531840 + i));
  return out;
}

const NicCache::Clock::time_point kNoon = NicCache::Clock::time_point(std::chrono::seconds(1'800'000'000));

}  // namespace

TEST_CASE("probe cache: a round's entry is read back within the hour, not after it, nor from the future",
          "[nic_cache]") {
  TempDir tmp;
  const NicCache cache((tmp.dir / "nics").string());
  const auto hosts = lab_hosts(4);
  const std::string key = NicCache::key(hosts, stacks_of(4), {}, 4, false);
  CHECK_FALSE(cache.load(key, 4, kNoon));  // nothing stored yet

  const auto stored = selections_of(4);
  cache.store(key, stored, kNoon);
  const auto hit = cache.load(key, 4, kNoon + 59min);
  REQUIRE(hit);
  CHECK(hit->selections == stored);
  CHECK(hit->made == kNoon);
  CHECK_FALSE(cache.load(key, 4, kNoon + 61min));  // stale, as horovodrun's after 60 minutes
  CHECK_FALSE(cache.load(key, 4, kNoon - 1min));   // made "later" than now: the clock moved back
  CHECK_FALSE(cache.load(key, 3, kNoon));          // another number of hosts is another round

  // Kept private: the directory 0700, the entry 0600, and no temporary file left behind.
  struct stat st {};
  REQUIRE(::stat((tmp.dir / "nics").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(::stat((tmp.dir / "nics" / (key + ".json")).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(std::distance(fs::directory_iterator(tmp.dir / "nics"), fs::directory_iterator()) == 1);

  // forget() drops it; forgetting what is not there is no error.
  cache.forget(key);
  CHECK_FALSE(cache.load(key, 4, kNoon));
  cache.forget(key);
}

TEST_CASE("probe cache: the key changes with every input of the round, and only with those", "[nic_cache]") {
  const auto hosts = lab_hosts(4);
  const auto stacks = stacks_of(4);
  const std::string key = NicCache::key(hosts, stacks, {}, 4, false);
  CHECK(key.size() == 64);
  CHECK(NicCache::key(hosts, stacks, {}, 4, false) == key);  // the same inputs, the same key

  auto changed = [&](auto edit) {
    auto h = hosts;
    auto s = stacks;
    std::vector<std::string> filter;
    std::size_t peers = 4;
    bool single = false;
    edit(h, s, filter, peers, single);
    return NicCache::key(h, s, filter, peers, single) != key;
  };
  using Hosts = std::vector<hvrun::HostInventory>;
  using Strings = std::vector<std::string>;
  CHECK(changed([](Hosts& h, Strings&, Strings&, std::size_t&, bool&) { h[1].interfaces[1].addresses[0] = "10.77.0.99"; }));
  CHECK(changed([](Hosts& h, Strings&, Strings&, std::size_t&, bool&) { h[2].interfaces[1].running = false; }));
  CHECK(changed([](Hosts& h, Strings&, Strings&, std::size_t&, bool&) { h[0].interfaces[1].speed_mbps = 123; }));
  CHECK(changed([](Hosts& h, Strings&, Strings&, std::size_t&, bool&) { h[3].interfaces.pop_back(); }));
  CHECK(changed([](Hosts& h, Strings&, Strings&, std::size_t&, bool&) { h[3].hostname = "elsewhere"; }));
  CHECK(changed([](Hosts& h, Strings&, Strings&, std::size_t&, bool&) { std::swap(h[0], h[1]); }));
  CHECK(changed([](Hosts&, Strings& s, Strings&, std::size_t&, bool&) { s[2] = "boot/net:4:1"; }));  // a new netns
  CHECK(changed([](Hosts&, Strings&, Strings& f, std::size_t&, bool&) { f = {"^eth9"}; }));
  CHECK(changed([](Hosts&, Strings&, Strings&, std::size_t& p, bool&) { p = 2; }));
  CHECK(changed([](Hosts&, Strings&, Strings&, std::size_t&, bool& single) { single = true; }));
}

TEST_CASE("probe cache: an entry that is not this key's, or not an entry, is a miss", "[nic_cache]") {
  TempDir tmp;
  const NicCache cache((tmp.dir / "nics").string());
  const auto hosts = lab_hosts(2);
  const std::string key = NicCache::key(hosts, stacks_of(2), {}, 4, false);
  const std::string other = NicCache::key(hosts, stacks_of(2), {"eth1"}, 4, false);
  cache.store(other, selections_of(2), kNoon);
  const fs::path mine = tmp.dir / "nics" / (key + ".json");

  SECTION("another key's entry under this key's name") { fs::copy_file(tmp.dir / "nics" / (other + ".json"), mine); }
  SECTION("not JSON") { std::ofstream(mine) << "{\"format\":1,\"key\":"; }
  SECTION("JSON without the fields") { std::ofstream(mine) << "{\"format\":1,\"key\":\"" << key << "\"}\n"; }
  SECTION("a format this hvrun does not write") {
    std::ofstream(mine) << "{\"format\":999,\"key\":\"" << key << "\",\"made\":1800000000,\"hosts\":[]}\n";
  }
  CHECK_FALSE(cache.load(key, 2, kNoon));
  // The next round stores over it.
  cache.store(key, selections_of(2), kNoon);
  CHECK(cache.load(key, 2, kNoon));
}

TEST_CASE("probe cache: a place it cannot write costs a warning, not the launch", "[nic_cache]") {
  TempDir tmp;
  fs::create_directories(tmp.dir);
  std::ofstream(tmp.dir / "a-file") << "x";
  const NicCache cache((tmp.dir / "a-file" / "nics").string());  // a directory under a regular file
  const auto hosts = lab_hosts(2);
  const std::string key = NicCache::key(hosts, stacks_of(2), {}, 4, false);
  CHECK_NOTHROW(cache.store(key, selections_of(2), kNoon));
  CHECK_FALSE(cache.load(key, 2, kNoon));
  CHECK_NOTHROW(cache.forget(key));
}

TEST_CASE("probe cache: a directory others own or can write in is not used; an entry others could write is a miss",
          "[nic_cache]") {
  // An entry chooses the NICs ranks talk over: one someone else could have written is never read.
  TempDir tmp;
  const fs::path dir = tmp.dir / "nics";
  const NicCache cache(dir.string());
  const auto hosts = lab_hosts(2);
  const std::string key = NicCache::key(hosts, stacks_of(2), {}, 4, false);
  const fs::path entry = dir / (key + ".json");
  cache.store(key, selections_of(2), kNoon);
  REQUIRE(cache.load(key, 2, kNoon));
  CHECK(cache.refusal().empty());
  CHECK((fs::status(dir).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  CHECK((fs::status(entry).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);

  fs::permissions(entry, fs::perms::group_write, fs::perm_options::add);
  CHECK_FALSE(cache.load(key, 2, kNoon));  // a miss; the next store replaces it
  cache.store(key, selections_of(2), kNoon);
  CHECK(cache.load(key, 2, kNoon));

  ::chmod(dir.c_str(), 0777);
  CHECK_FALSE(cache.load(key, 2, kNoon));
  CHECK(cache.refusal() == "probe cache: " + dir.string() + " has mode 0777, writable by others than its owner: hvrun "
                           "writes only in directories no one else can write in; run chmod go-w " + dir.string() +
                           ", or use another directory");
  fs::remove(entry);
  cache.store(key, selections_of(2), kNoon);
  CHECK_FALSE(fs::exists(entry));  // not written there either
  ::chmod(dir.c_str(), 0700);

  if (::geteuid() != 0) {
    WARN("skipped: the case of another user's cache directory needs root (a second Unix user)");
    return;
  }
  const char* prefix = std::getenv("HVRUN_TEST_LAB_PREFIX");
  hvrun::test::NeighbourUser user(std::string(prefix != nullptr && *prefix != '\0' ? prefix : "hv") + "-files");
  cache.store(key, selections_of(2), kNoon);
  REQUIRE(cache.load(key, 2, kNoon));
  user.give(dir.string(), /*recursive=*/true);
  CHECK_FALSE(cache.load(key, 2, kNoon));
  CHECK(cache.refusal() == "probe cache: " + dir.string() + " is owned by " + user.name() + " (uid " +
                           std::to_string(user.uid()) + "), not by you or root: hvrun writes only in directories "
                           "that are yours; use another directory, or have its owner remove it and let hvrun make it");
}

TEST_CASE("probe cache: it lives under XDG_CACHE_HOME, else HOME/.cache, else nowhere", "[nic_cache]") {
  {
    EnvVar xdg("XDG_CACHE_HOME", "/var/cache/someone");
    EnvVar home("HOME", "/home/someone");
    CHECK(NicCache::default_dir() == "/var/cache/someone/hvrun/nics");
  }
  {
    EnvVar xdg("XDG_CACHE_HOME", "relative/is/ignored");  // the XDG spec: only absolute paths count
    EnvVar home("HOME", "/home/someone");
    CHECK(NicCache::default_dir() == "/home/someone/.cache/hvrun/nics");
  }
  {
    EnvVar xdg("XDG_CACHE_HOME", nullptr);
    EnvVar home("HOME", nullptr);
    CHECK_FALSE(NicCache::default_dir());
  }
}

TEST_CASE("probe round: a cached outcome is adopted without a probe", "[nic_cache][probe_round]") {
  std::vector<std::size_t> members{0, 1, 2, 3};
  hvrun::ProbeRound round(members, lab_hosts(4), {}, false, 4, true);
  REQUIRE_FALSE(round.planned().empty());  // what a round without the cache would probe
  const auto cached = selections_of(4);
  round.adopt(cached);
  CHECK(round.planned().empty());
  CHECK(round.probes_sent() == 0);
  CHECK(round.every_member_chosen());
  for (std::size_t i = 0; i < 4; ++i) {
    REQUIRE(round.choice_of(i));
    CHECK(*round.choice_of(i) == cached[i].selected);
    CHECK(round.choice_of(i)->why == "the only usable NIC");
    REQUIRE(round.selections()[i].nics.size() == 1);
    CHECK(round.selections()[i].nics[0].usable);
    CHECK(round.selections()[i].nics[0].iface == hvrun::test::fabric_name(i));
  }
  // A cache that does not match the round is hvrun's bug, not a silent mix-up.
  hvrun::ProbeRound other(members, lab_hosts(4), {}, false, 4, true);
  CHECK_THROWS_AS(other.adopt(selections_of(3)), hvrun::InternalError);
}
