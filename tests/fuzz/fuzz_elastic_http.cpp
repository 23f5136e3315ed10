// libFuzzer target: the HTTP handlers of Horovod's Gloo rendezvous server in elastic mode.
// The body, with what it checks, is hvrun::fuzz::elastic_http in tests/fuzz/elastic_http_entry.cpp.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  hvrun::fuzz::elastic_http(hvrun::fuzz::as_text(data, size));
  return 0;
}
