/* A C rank that dereferences NULL in a function of its own (tests/test_faults.cpp): the crash
 * report must name poison_pointer, found in this program's .symtab (no -rdynamic, not exported). */
#include <stdio.h>

static int __attribute__((noinline)) poison_pointer(volatile int *p) { return *p; }

int main(void) {
  printf("about to dereference NULL\n");
  fflush(stdout);
  return poison_pointer((volatile int *)0);
}
