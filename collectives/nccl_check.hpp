#pragma once
// Private: NCCL and CUDA results as exceptions (NCCLCHECK's idea). Includes nccl.h, so only .cpp files
// of the NCCL path and its tests include it.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

namespace hvrun {

// Throws CollectiveError when `result` is neither ncclSuccess nor ncclInProgress: "<where>: <call>
// failed: <ncclGetErrorString> (<ncclGetLastError(comm)>)". Returns `result`.
ncclResult_t check_nccl(ncclResult_t result, const char* call, ncclComm_t comm, const std::string& where);

// Throws CollectiveError when `result` is not cudaSuccess: "<where>: <call> failed: <cudaGetErrorString>".
void check_cuda(cudaError_t result, const char* call, const std::string& where);

}  // namespace hvrun
