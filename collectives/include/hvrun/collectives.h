/* hvrun collectives, C interface: for programs in C or any language with a C FFI. Link
 * libhvrun_collectives (pkg-config hvrun-collectives; CMake hvrun::collectives).
 *
 *   hvrun_comm* comm;
 *   if (hvrun_init(&comm) != 0) { fprintf(stderr, "%s\n", hvrun_error_string()); exit(1); }
 *   hvrun_allreduce(comm, buf, buf, n, HVRUN_FLOAT32, HVRUN_SUM);
 *   hvrun_finalize(comm);
 *
 * Every function returns HVRUN_SUCCESS (0) or one of the hvrun_result codes below saying what kind of
 * failure it was; hvrun_error_string() then says why (the calling thread's last error). Collective calls: every rank makes the same calls in the same order.
 * A communicator is used by one thread at a time. */
#ifndef HVRUN_COLLECTIVES_H
#define HVRUN_COLLECTIVES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum hvrun_result {
  HVRUN_SUCCESS = 0,
  HVRUN_ERROR_USAGE = 1,      /* a bad argument, or the rank contract is missing: not run under hvrun */
  HVRUN_ERROR_TIMEOUT = 2,    /* a deadline passed (HVRUN_COLLECTIVE_TIMEOUT): a rank is gone or stuck */
  HVRUN_ERROR_COLLECTIVE = 3, /* Gloo, NCCL, the job's store or the rendezvous failed: a peer
                                 died or broke the protocol, the store refused */
  HVRUN_ERROR_SYSTEM = 4,     /* a system call failed, or memory ran out */
  HVRUN_ERROR_INTERNAL = 5    /* anything else: a bug in hvrun, please report it */
} hvrun_result;

typedef enum hvrun_dtype {
  HVRUN_FLOAT32 = 0,
  HVRUN_FLOAT64 = 1,
  HVRUN_INT32 = 2,
  HVRUN_INT64 = 3,
  HVRUN_FLOAT16 = 4,  /* GPU (NCCL) only */
  HVRUN_BFLOAT16 = 5, /* GPU (NCCL) only */
  /* Not a type: makes every int from 0 up a valid value of the enum in C++ as in C, so a wrong value
   * from any language is an error message, not undefined behaviour. */
  HVRUN_DTYPE_MAX_ENUM = 0x7fffffff
} hvrun_dtype;

typedef enum hvrun_op {
  HVRUN_SUM = 0,
  HVRUN_MIN = 1,
  HVRUN_MAX = 2,
  HVRUN_PROD = 3,
  HVRUN_OP_MAX_ENUM = 0x7fffffff /* not an operation, see HVRUN_DTYPE_MAX_ENUM */
} hvrun_op;

typedef struct hvrun_comm hvrun_comm;

/* From the rank contract hvrun sets (HVRUN_RANK, HVRUN_SIZE, ..., HVRUN_STORE_*). On success *comm
 * is a connected communicator; on failure *comm is NULL. */
int hvrun_init(hvrun_comm** comm);
/* Collective: waits for every rank (a barrier), then frees the communicator, even when the barrier
 * fails (NULL is allowed). */
int hvrun_finalize(hvrun_comm* comm);

int hvrun_rank(const hvrun_comm* comm);
int hvrun_size(const hvrun_comm* comm);
int hvrun_local_rank(const hvrun_comm* comm);
/* The NIC Gloo uses ("" when bound by address); valid while comm lives. */
const char* hvrun_iface(const hvrun_comm* comm);

/* Host buffers (Gloo). send == recv is in place. allgather's recv holds size * count elements. */
int hvrun_allreduce(hvrun_comm* comm, const void* send, void* recv, size_t count, hvrun_dtype type, hvrun_op op);
int hvrun_broadcast(hvrun_comm* comm, void* buffer, size_t count, hvrun_dtype type, int root);
int hvrun_allgather(hvrun_comm* comm, const void* send, void* recv, size_t count, hvrun_dtype type);
int hvrun_barrier(hvrun_comm* comm);

/* CUDA device buffers (NCCL), when built with it. stream is a cudaStream_t or NULL (the communicator's
 * own); calls enqueue, hvrun_gpu_synchronize waits. device -1: local rank modulo the device count. */
int hvrun_gpu_init(hvrun_comm* comm, int device);
int hvrun_gpu_allreduce(hvrun_comm* comm, const void* send, void* recv, size_t count, hvrun_dtype type,
                        hvrun_op op, void* stream);
int hvrun_gpu_broadcast(hvrun_comm* comm, void* buffer, size_t count, hvrun_dtype type, int root, void* stream);
int hvrun_gpu_allgather(hvrun_comm* comm, const void* send, void* recv, size_t count, hvrun_dtype type,
                        void* stream);
int hvrun_gpu_synchronize(hvrun_comm* comm, void* stream);

/* The calling thread's last error message ("" when none). */
const char* hvrun_error_string(void);

#ifdef __cplusplus
}
#endif

#endif /* HVRUN_COLLECTIVES_H */
