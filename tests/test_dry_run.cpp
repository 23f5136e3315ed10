// --dry-run's output (launcher/ranks/dry_run.hpp), without the binary: the plan, placeholders for what only a
// launch knows, -x over the contract, and the environment flags. (That it starts nothing is
// test_local_launch.cpp's.)
#include <catch2/catch.hpp>

#include <sstream>

#include "launcher/ranks/dry_run.hpp"

TEST_CASE("dry run: plan, placeholders for the launch's choices, -x over the contract, the flags", "[dry_run]") {
  hvrun::LaunchOptions o;
  o.hosts = {{"a", 2}, {"b", 1}, {"c", 4}};
  o.command = {"python3", "train.py", "--lr", "0.1"};
  o.horovod_env = {{"HOROVOD_CYCLE_TIME", "5"}};
  o.env = {{"MASTER_PORT", "29500"}, {"DATA", std::nullopt}, {"UNSET_ONE", std::nullopt}};
  const hvrun::RankPlan plan(o.hosts, 3, false);
  std::ostringstream out;
  hvrun::print_dry_run(out, plan, o, {{"DATA", "/data"}, {"PATH", "/bin"}});
  const std::string text = out.str();
  INFO(text);
  CHECK_THAT(text, Catch::StartsWith("# hvrun dry run: 3 ranks on 3 hosts\n"
                                     "# host a: slots 2, ranks 0-1\n"
                                     "# host b: slots 1, ranks 2-2\n"
                                     "# host c: slots 4, no ranks\n"
                                     "# command: python3 train.py --lr 0.1\n"));
  CHECK_THAT(text, Catch::Contains("[2] HVRUN_RANK=2\n"));
  CHECK_THAT(text, Catch::Contains("[2] HVRUN_IFACE=<chosen at launch>\n"));
  CHECK_THAT(text, Catch::Contains("[0] MASTER_ADDR=<rank 0's host's address>\n"));
  CHECK_THAT(text, Catch::Contains("[1] MASTER_PORT=29500\n"));  // -x wins, so no placeholder
  CHECK_THAT(text, Catch::Contains("[1] HOROVOD_GLOO_RENDEZVOUS_PORT=<free port picked at launch>\n"));
  CHECK_THAT(text, Catch::Contains("[0] DATA=/data\n"));
  CHECK_THAT(text, !Catch::Contains("OMP_NUM_THREADS"));  // torchrun's default is the torchrun form's
  CHECK_THAT(text, Catch::Contains("[2] GROUP_WORLD_SIZE=2\n"));
  o.torchrun_form = true;
  std::ostringstream torchrun;
  hvrun::print_dry_run(torchrun, plan, o, {{"DATA", "/data"}});
  CHECK_THAT(torchrun.str(), Catch::Contains("[1] OMP_NUM_THREADS=1\n"));  // a runs two ranks
  CHECK_THAT(torchrun.str(), !Catch::Contains("[2] OMP_NUM_THREADS"));
  std::ostringstream tuned;
  hvrun::print_dry_run(tuned, plan, o, {{"OMP_NUM_THREADS", "4"}});
  CHECK_THAT(tuned.str(), !Catch::Contains("] OMP_NUM_THREADS"));  // hvrun's environment sets it: theirs
  CHECK_THAT(text, !Catch::Contains("UNSET_ONE="));
  CHECK_THAT(text, !Catch::Contains("PATH="));  // hvrun's environment is not the contract
  CHECK_THAT(text, Catch::EndsWith("# HOROVOD_CYCLE_TIME=5 (horovodrun's flags)\n"
                                   "# -x MASTER_PORT=29500\n"
                                   "# -x DATA (from hvrun's environment)\n"
                                   "# -x UNSET_ONE (from hvrun's environment)\n"));
}

TEST_CASE("dry run: the first attempt's torchelastic variables, --max-restarts and --rdzv-id in them", "[dry_run]") {
  hvrun::LaunchOptions o;
  o.hosts = {{"a", 1}, {"b", 1}};
  o.command = {"python3", "ddp.py"};
  const hvrun::RankPlan plan(o.hosts, 2, false);
  std::ostringstream plain;
  hvrun::print_dry_run(plain, plan, o, {});
  CHECK_THAT(plain.str(), Catch::Contains("[1] TORCHELASTIC_MAX_RESTARTS=0\n"));
  CHECK_THAT(plain.str(), Catch::Contains("[1] ROLE_NAME=default\n"));
  CHECK_THAT(plain.str(), !Catch::Contains("OMP_NUM_THREADS"));  // one rank per host
  o.run_id = "job7";
  std::ostringstream named;
  hvrun::print_dry_run(named, plan, o, {});
  CHECK_THAT(named.str(), Catch::Contains("[0] TORCHELASTIC_RUN_ID=job7\n"));
  o.run_id.clear();

  o.max_restarts = 2;
  std::ostringstream out;
  hvrun::print_dry_run(out, plan, o, {});
  const std::string text = out.str();
  INFO(text);
  for (const char* r : {"[0] ", "[1] "}) {
    CHECK_THAT(text, Catch::Contains(std::string(r) + "TORCHELASTIC_RESTART_COUNT=0\n"));
    CHECK_THAT(text, Catch::Contains(std::string(r) + "TORCHELASTIC_MAX_RESTARTS=2\n"));
    CHECK_THAT(text, Catch::Contains(std::string(r) + "TORCHELASTIC_RUN_ID=hvrun-<the launcher's hostname>-<its pid>\n"));
  }
  CHECK_THAT(text, !Catch::Contains("TORCHELASTIC_USE_AGENT_STORE"));
}
