/* The C interface in use (and proof that hvrun_collectives.h is plain C): run under hvrun,
 *   hvrun -np 4 hvrun-collectives-c-example
 * Each rank allreduces, broadcasts and allgathers small arrays, checks the results and prints one line. */
#include <stdio.h>
#include <stdlib.h>

#include "hvrun/collectives.h"

#define COUNT 1001

static int fail(const char* what) {
  fprintf(stderr, "hvrun-collectives-c-example: %s: %s\n", what, hvrun_error_string());
  return 1;
}

int main(void) {
  hvrun_comm* comm = NULL;
  if (hvrun_init(&comm) != 0) return fail("init");
  const int rank = hvrun_rank(comm), size = hvrun_size(comm);
  static int values[COUNT], sums[COUNT];
  for (int i = 0; i < COUNT; ++i) values[i] = rank + 1 + i;
  if (hvrun_allreduce(comm, values, sums, COUNT, HVRUN_INT32, HVRUN_SUM) != 0) return fail("allreduce");
  int wrong = 0;
  for (int i = 0; i < COUNT; ++i)
    if (sums[i] != size * (size + 1) / 2 + size * i) ++wrong;

  double root_value = rank == 0 ? 2.5 : 0.0;
  if (hvrun_broadcast(comm, &root_value, 1, HVRUN_FLOAT64, 0) != 0) return fail("broadcast");
  if (root_value != 2.5) ++wrong;

  long long mine = 100 + rank;
  long long* all = calloc((size_t)size, sizeof *all);
  if (all == NULL) return 1;
  if (hvrun_allgather(comm, &mine, all, 1, HVRUN_INT64) != 0) return fail("allgather");
  for (int r = 0; r < size; ++r)
    if (all[r] != 100 + r) ++wrong;
  free(all);

  if (hvrun_barrier(comm) != 0) return fail("barrier");
  /* Half floats are NCCL's only: the Gloo path refuses them with a message, and the comm stays usable. */
  if (hvrun_allreduce(comm, values, values, 1, HVRUN_FLOAT16, HVRUN_SUM) == 0) ++wrong;
  printf("rank %d of %d on %s: %s\n", rank, size, hvrun_iface(comm), wrong == 0 ? "ok" : "WRONG");
  if (hvrun_finalize(comm) != 0) return fail("finalize");
  return wrong == 0 ? 0 : 1;
}
