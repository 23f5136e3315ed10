# hvrun_precompile(TARGET [TESTS]): the third-party headers that most of hvrun's sources include,
# directly or through the common layer's headers (Boost.Asio, spdlog, nlohmann/json, the standard
# library), compiled once per target instead of once per source. Measured in docs/BENCHMARKS.md ("CI
# time"): they are most of each object's compile time. TESTS adds Catch2, which every test file includes.
# HVRUN_PCH=OFF builds without them; the fuzz build (clang) never uses them, so FUZZ_BUILD_ALL still
# checks that every source includes what it uses. Only third-party headers: the standard library comes
# with them, and hvrun's own headers change too often to precompile.
option(HVRUN_PCH "Precompile the common third-party headers (faster builds)" ON)

function(hvrun_precompile target)
  if(NOT HVRUN_PCH OR HVRUN_FUZZ)
    return()
  endif()
  set(headers
    <boost/asio/io_context.hpp> <boost/asio/steady_timer.hpp> <boost/asio/ip/tcp.hpp>
    <boost/asio/post.hpp> <boost/asio/write.hpp> <boost/asio/signal_set.hpp>
    <boost/asio/posix/stream_descriptor.hpp>
    <nlohmann/json.hpp> <spdlog/spdlog.h>)
  if("TESTS" IN_LIST ARGN)
    list(APPEND headers <catch2/catch.hpp>)
  endif()
  target_precompile_headers(${target} PRIVATE ${headers})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 forgets that code from a precompiled header came from a system header when its middle end
    # warns, so libstdc++'s known false positives surface in our objects (std::string's operator+ inlined
    # into memcpy: -Warray-bounds, GCC PR 105651, and its kin). A build without the header shows none.
    target_compile_options(${target} PRIVATE -Wno-array-bounds -Wno-stringop-overflow -Wno-stringop-overread
                           -Wno-restrict)
  endif()
endfunction()
