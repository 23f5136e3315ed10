/* A library whose constructor never ends (faults/stuck_in_loader.c): the thread that dlopens it keeps
 * the loader's lock. It first writes a byte to the descriptor in $HVRUN_TEST_ENTERED_FD. */
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void wait_in_constructor(void) {
  const char *fd = getenv("HVRUN_TEST_ENTERED_FD");
  if (fd != NULL && write(atoi(fd), "x", 1) != 1) _exit(1);
  for (;;) pause();
}
