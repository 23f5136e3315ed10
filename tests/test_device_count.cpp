// torchrun's --nproc-per-node gpu, cpu and auto: the count rules (launcher/cli/device_count.hpp) with
// torchrun's meaning, CUDA_VISIBLE_DEVICES read as CUDA reads it.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/cli/device_count.hpp"

using Args = std::vector<std::string>;
using hvrun::HostDevices;
using hvrun::PerHostCount;
using hvrun::visible_gpus;

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
