#pragma once
// Where this build put what the tests run, and how it was built. The values are defined in a file that
// CMake generates in each build directory (tests/CMakeLists.txt), not passed as -D flags: the test sources
// then compile to the same objects in the plain and the sanitized builds, and ccache hands the second
// build the first one's (docs/DESIGN.md section 8).

namespace hvrun::test {

struct BuildPaths {
  const char* bin_dir;              // hvrun, hvrun-agent
  const char* collectives_bin_dir;  // hvrun-allreduce-bench, hvrun-collectives-c-example
  const char* source_dir;           // the checkout
  const char* crash_library;        // libhvrun_crash.so
  const char* crash_null;           // tests/faults/crash_null.c: dereferences NULL
  const char* stuck_in_loader;      // tests/faults/stuck_in_loader.c: a thread inside dlopen
  const char* waiting_constructor;  // tests/faults/waiting_constructor.c: the library it loads
  const char* stuck_in_malloc;      // tests/faults/stuck_in_malloc.c: hangs or crashes inside malloc
  bool sanitized;                   // HVRUN_SANITIZE=ON
  bool agent_self_contained;        // hvrun-agent needs nothing but glibc (not with sanitizers or fuzzing)
};

const BuildPaths& build();

}  // namespace hvrun::test
