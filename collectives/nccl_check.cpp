#include "collectives/nccl_check.hpp"

#include "common/error.hpp"

namespace hvrun {

ncclResult_t check_nccl(ncclResult_t result, const char* call, ncclComm_t comm, const std::string& where) {
  if (result == ncclSuccess || result == ncclInProgress) return result;
  std::string message = where + ": " + call + " failed: " + ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') message += " (" + std::string(last) + ")";
  throw CollectiveError(message);
}

void check_cuda(cudaError_t result, const char* call, const std::string& where) {
  if (result == cudaSuccess) return;
  throw CollectiveError(where + ": " + call + " failed: " + cudaGetErrorString(result));
}

}  // namespace hvrun
