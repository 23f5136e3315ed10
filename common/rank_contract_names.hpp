#pragma once
// The names of the rank contract: the environment variables hvrun gives every rank (docs/DESIGN.md,
// README). Written by the launcher (launcher/ranks/rank_env.cpp), read by the collectives
// (collectives/rank_contract.cpp); one spelling for both sides.
namespace hvrun::rank_contract {

// hvrun's own.
inline constexpr const char* kRank = "HVRUN_RANK";
inline constexpr const char* kSize = "HVRUN_SIZE";
inline constexpr const char* kLocalRank = "HVRUN_LOCAL_RANK";
inline constexpr const char* kLocalSize = "HVRUN_LOCAL_SIZE";
inline constexpr const char* kCrossRank = "HVRUN_CROSS_RANK";
inline constexpr const char* kCrossSize = "HVRUN_CROSS_SIZE";
inline constexpr const char* kHostname = "HVRUN_HOSTNAME";
inline constexpr const char* kIface = "HVRUN_IFACE";  // this host's selected NIC
inline constexpr const char* kAddr = "HVRUN_ADDR";    // its address on that NIC
inline constexpr const char* kStoreAddr = "HVRUN_STORE_ADDR";
inline constexpr const char* kStorePort = "HVRUN_STORE_PORT";
inline constexpr const char* kStoreToken = "HVRUN_STORE_TOKEN";
// --mpi, observed (issue 40): the job's marker in its MPI ranks' environment, by which each host's agent
// finds the ranks that mpirun's daemons started (agent/mpi_rank_finder.hpp).
inline constexpr const char* kMpiMarker = "HVRUN_MPI_MARKER";
// Set by the user, never by the launcher: the collectives' rendezvous and per-call timeout in seconds.
inline constexpr const char* kCollectiveTimeout = "HVRUN_COLLECTIVE_TIMEOUT";

// The libraries' NIC choice.
inline constexpr const char* kNcclSocketIfname = "NCCL_SOCKET_IFNAME";
inline constexpr const char* kGlooSocketIfname = "GLOO_SOCKET_IFNAME";

// Horovod's.
inline constexpr const char* kHorovodRank = "HOROVOD_RANK";
inline constexpr const char* kHorovodSize = "HOROVOD_SIZE";
inline constexpr const char* kHorovodLocalRank = "HOROVOD_LOCAL_RANK";
inline constexpr const char* kHorovodLocalSize = "HOROVOD_LOCAL_SIZE";
inline constexpr const char* kHorovodCrossRank = "HOROVOD_CROSS_RANK";
inline constexpr const char* kHorovodCrossSize = "HOROVOD_CROSS_SIZE";
inline constexpr const char* kHorovodHostname = "HOROVOD_HOSTNAME";
inline constexpr const char* kHorovodGlooIface = "HOROVOD_GLOO_IFACE";
inline constexpr const char* kHorovodGlooRendezvousAddr = "HOROVOD_GLOO_RENDEZVOUS_ADDR";
inline constexpr const char* kHorovodGlooRendezvousPort = "HOROVOD_GLOO_RENDEZVOUS_PORT";

// torch's env:// rendezvous.
inline constexpr const char* kTorchRank = "RANK";
inline constexpr const char* kTorchWorldSize = "WORLD_SIZE";
inline constexpr const char* kTorchLocalRank = "LOCAL_RANK";
inline constexpr const char* kTorchLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kTorchGroupRank = "GROUP_RANK";
// torchrun's worker group: the hosts that run ranks, and the ranks of the one role hvrun runs.
inline constexpr const char* kTorchGroupWorldSize = "GROUP_WORLD_SIZE";
inline constexpr const char* kTorchRoleRank = "ROLE_RANK";
inline constexpr const char* kTorchRoleWorldSize = "ROLE_WORLD_SIZE";
inline constexpr const char* kTorchRoleName = "ROLE_NAME";
// torchrun's default for a rank that shares its host with others, when nothing sets it.
inline constexpr const char* kOmpNumThreads = "OMP_NUM_THREADS";
// torchrun's restart contract, in every job (TORCHELASTIC_USE_AGENT_STORE is never set: no torchelastic
// agent store exists).
inline constexpr const char* kTorchRestartCount = "TORCHELASTIC_RESTART_COUNT";
inline constexpr const char* kTorchMaxRestarts = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr const char* kTorchRunId = "TORCHELASTIC_RUN_ID";
inline constexpr const char* kTorchUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
inline constexpr const char* kMasterPort = "MASTER_PORT";

}  // namespace hvrun::rank_contract
