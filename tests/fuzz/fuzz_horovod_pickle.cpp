// libFuzzer target: the readers of Horovod's pickled messages and their Wire framing.
// The body, with what it checks, is hvrun::fuzz::horovod_pickle in tests/fuzz/horovod_pickle_entry.cpp.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hvrun::fuzz::horovod_pickle(hvrun::fuzz::as_text(data, size));
  return 0;
}
