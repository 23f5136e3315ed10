/* A C rank whose helper thread sits inside dlopen, in the constructor of a library that waits
 * (faults/waiting_constructor.c), holding the loader's lock, while its main thread waits in wait_here
 * (tests/test_faults.cpp, tests/test_hang_autopsy.cpp). Asked for its stack, it must answer with
 * wait_here, not wait for the loader's lock. argv[1]: the library. Prints "ready" once the helper is
 * inside the constructor. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *library;

static void *load(void *arg) {
  (void)arg;
  if (dlopen(library, RTLD_NOW) == NULL) fprintf(stderr, "dlopen: %s\n", dlerror());
  return NULL;
}

static void __attribute__((noinline)) wait_here(void) {
  for (;;) pause();
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
    return 2;
  }
  library = argv[1];
  int entered[2];
  if (pipe(entered) != 0) return 1;
  char fd[16];
  snprintf(fd, sizeof fd, "%d", entered[1]);
  setenv("HVRUN_TEST_ENTERED_FD", fd, 1);
  pthread_t helper;
  if (pthread_create(&helper, NULL, load, NULL) != 0) return 1;
  char byte;
  if (read(entered[0], &byte, 1) != 1) return 1; /* the constructor runs: the loader's lock is held */
  printf("ready\n");
  fflush(stdout);
  wait_here();
}
