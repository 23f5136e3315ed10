// torchrun's --nproc-per-node gpu, cpu and auto: the count rules (launcher/cli/device_count.hpp) with
// torchrun's meaning, CUDA_VISIBLE_DEVICES read as CUDA reads it, the command line's checks, and the
// census's question and answer (launcher/start/device_census.hpp) as this machine's /bin/sh gives it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/cli/device_count.hpp"
#include "launcher/start/device_census.hpp"
#include "tests/sshd_fixture.hpp"
#include "tests/support/child_process.hpp"
#include "tests/support/cli_parse.hpp"

using Args = std::vector<std::string>;
using hvrun::HostDevices;
using hvrun::PerHostCount;
using hvrun::visible_gpus;
using hvrun::test::cli_error;

namespace {

const std::vector<std::string> kFour{"GPU-aaaa1111", "GPU-bbbb2222", "GPU-cccc3333", "GPU-dddd4444"};

std::string usage_error_of(PerHostCount c, const HostDevices& d, const std::optional<std::string>& visible) {
  try {
    hvrun::ranks_for(c, "node7", d, visible);
  } catch (const hvrun::UsageError& e) {
    return e.what();
  }
  return "counted";
}

}  // namespace

TEST_CASE("CUDA_VISIBLE_DEVICES narrows the driver's GPUs as CUDA reads it", "[torchrun][nproc]") {
  CHECK(visible_gpus(kFour, std::nullopt) == 4);  // unset: all
  CHECK(visible_gpus(kFour, "") == 0);            // set and empty: none
  CHECK(visible_gpus(kFour, "2,0") == 2);
  CHECK(visible_gpus(kFour, " 1 , 3 ") == 2);
  CHECK(visible_gpus(kFour, "0,1,2,-1,3") == 3);  // a negative ordinal ends the list
  CHECK(visible_gpus(kFour, "-1") == 0);
  CHECK(visible_gpus(kFour, "2,+3,-0") == 3);    // signs as strtoul takes them
  CHECK(visible_gpus(kFour, "0,1,0") == 0);       // named twice: none
  CHECK(visible_gpus(kFour, "1gpu2,2ampere") == 2);  // the leading digits
  CHECK(visible_gpus(kFour, "3,2,two,1") == 2);   // no digits: the list ends
  CHECK(visible_gpus(kFour, "1,7,2") == 1);       // beyond the driver's GPUs: the list ends there
  CHECK(visible_gpus(kFour, "GPU-bbbb2222,GPU-dddd") == 2);  // UUIDs, whole or their leading part
  CHECK(visible_gpus(kFour, "GPU-cccc3333,GPU-ffff,GPU-aaaa1111") == 1);
  CHECK(visible_gpus(kFour, "GPU-aaaa1111,0") == 1);
  CHECK(visible_gpus(kFour, "MIG-1,MIG-2") == 2);  // not checkable here: as listed
  CHECK(visible_gpus({}, "0") == 0);
}

TEST_CASE("--nproc-per-node cpu, gpu and auto per host: torchrun's rules", "[torchrun][nproc]") {
  const HostDevices none{16, std::nullopt}, empty{16, std::vector<std::string>{}}, four{16, kFour};
  using enum PerHostCount;
  CHECK(hvrun::ranks_for(kCpu, "h", four, std::nullopt) == 16);
  CHECK(hvrun::ranks_for(kGpu, "h", four, std::nullopt) == 4);
  CHECK(hvrun::ranks_for(kGpu, "h", four, "0,1") == 2);  // as the ranks will get it
  CHECK(hvrun::ranks_for(kAuto, "h", four, "3") == 1);
  CHECK(hvrun::ranks_for(kAuto, "h", none, std::nullopt) == 16);  // no GPU: the CPUs
  CHECK(hvrun::ranks_for(kAuto, "h", four, "") == 16);
  CHECK_THAT(usage_error_of(kGpu, none, std::nullopt),
             Catch::StartsWith("--nproc-per-node gpu: node7 has no GPU that CUDA would show the ranks: no NVIDIA "
                               "driver there") &&
                 Catch::Contains("Cuda is not available") && Catch::EndsWith("Give --nproc-per-node cpu or auto, or a number"));
  CHECK_THAT(usage_error_of(kGpu, empty, std::nullopt), Catch::Contains("node7") && Catch::Contains("lists no GPU"));
  CHECK_THAT(usage_error_of(kGpu, four, "7"), Catch::Contains("node7") && Catch::Contains("CUDA_VISIBLE_DEVICES='7'") &&
                                                   Catch::Contains("hides all 4 of its GPUs"));
}

TEST_CASE("--nproc-per-node gpu, cpu, auto on the command line: counted later, refused with what cannot go with them",
          "[cli][torchrun][nproc]") {
  for (const auto& [value, kind] : {std::pair{"gpu", PerHostCount::kGpu}, std::pair{"cpu", PerHostCount::kCpu},
                                    std::pair{"auto", PerHostCount::kAuto}}) {
    INFO(value);
    const auto o = hvrun::test::parse_cli({"-H", "a,b", "--nproc_per_node", value, "t.py"}).options;
    CHECK(o.per_host_count == kind);
    CHECK(o.np == 0);
    CHECK(o.hosts[0].slots == 1);
    CHECK(o.torchrun_form);
  }
  CHECK_THAT(cli_error({"--nproc-per-node", "xpu", "t.py"}), Catch::Contains("not XPUs"));
  CHECK_THAT(cli_error({"--nproc-per-node", "two", "t.py"}), Catch::StartsWith("--nproc-per-node: 'two' is not a number"));
  CHECK_THAT(cli_error({"-H", "a:4,b", "--nproc-per-node", "gpu", "t.py"}),
             Catch::StartsWith("--nproc-per-node gpu runs as many ranks on every host as it has, and a has 4 slots"));
  CHECK_THAT(cli_error({"-H", "a,b", "-np", "4", "--nproc-per-node", "cpu", "t.py"}),
             Catch::StartsWith("-np 4 and --nproc-per-node cpu both set the ranks"));
  CHECK_THAT(cli_error({"-H", "a,b", "--min-np", "1", "--nproc-per-node", "auto", "t.py"}),
             Catch::StartsWith("--nproc-per-node auto: the hosts of a Horovod elastic job"));

  SECTION("the counts become the slots, -np their sum, --nnodes MIN:MAX's floor MIN times the fewest") {
    auto o = hvrun::test::parse_cli({"-H", "a,b,c", "--nnodes", "2:3", "--max-restarts", "1", "--nproc-per-node", "gpu",
                                     "t.py"})
                 .options;
    CHECK(o.min_np == 0);
    CHECK(o.counted_min_hosts == 2);
    hvrun::apply_counts(o, {4, 2, 8});
    CHECK(o.hosts[0].slots == 4);
    CHECK(o.hosts[1].slots == 2);
    CHECK(o.hosts[2].slots == 8);
    CHECK(o.np == 14);
    CHECK(o.min_np == 4);
    CHECK(o.per_host_count == PerHostCount::kNone);
    auto m = hvrun::test::parse_cli({"-H", "a,b", "--max-restarts", "1", "--min-np", "5", "--nproc-per-node", "cpu",
                                     "t.py"})
                 .options;
    CHECK_THROWS_WITH(hvrun::apply_counts(m, {2, 2}),
                      Catch::StartsWith("--min-np 5 exceeds the job's 4 ranks (the hosts' counts under --nproc-per-node "
                                        "cpu)"));
  }
}

TEST_CASE("the census's question and answer: this machine's /bin/sh, a login shell's greeting, the driver's files",
          "[torchrun][nproc]") {
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  SECTION("the question as a login shell runs it") {
    const auto r = hvrun::test::run({"/bin/sh", "-c", hvrun::device_census_command()}, std::chrono::seconds(10));
    REQUIRE(r.exit_code == 0);
    const HostDevices d = hvrun::parse_device_census("here", r.out);
    CHECK(d.cpus == cpus);
    CHECK(d.gpus.has_value() == (::access("/proc/driver/nvidia/gpus", F_OK) == 0));
    CHECK(hvrun::local_devices().cpus == cpus);
  }
  SECTION("answers") {
    const HostDevices d = hvrun::parse_device_census("h", "Welcome!\nhvrun-device-census\ncpus 64\ndriver\ngpu GPU-1\ngpu\n");
    CHECK(d.cpus == 64);
    CHECK(d.gpus == std::vector<std::string>{"GPU-1", ""});
    CHECK_FALSE(hvrun::parse_device_census("h", "hvrun-device-census\ncpus 2\n").gpus);
    CHECK_THROWS_WITH(hvrun::parse_device_census("node3", "cpus 2\n"), Catch::StartsWith("node3: ") && Catch::Contains("no answer"));
    CHECK_THROWS_WITH(hvrun::parse_device_census("node3", "hvrun-device-census\ncpus many\n"),
                      Catch::StartsWith("node3: ") && Catch::Contains("'cpus many'"));
    CHECK_THROWS_WITH(hvrun::parse_device_census("node3", "hvrun-device-census\ncpus 2\ngpu GPU-1\n"),
                      Catch::Contains("'gpu GPU-1'"));  // a GPU without the driver
  }
  SECTION("this machine's driver files") {
    hvrun::testing::TempDir dir;
    hvrun::testing::write_text(dir.path() / "gpus/0000:02:00.0/information", "Model: H100\nGPU UUID:  GPU-bbbb \nBus Type: PCIe\n");
    hvrun::testing::write_text(dir.path() / "gpus/0000:01:00.0/information", "Model: H100\n");
    const HostDevices d = hvrun::local_devices((dir.path() / "gpus").string());
    CHECK(d.gpus == std::vector<std::string>{"", "GPU-bbbb"});
    CHECK_FALSE(hvrun::local_devices((dir.path() / "none").string()).gpus);
  }
}
