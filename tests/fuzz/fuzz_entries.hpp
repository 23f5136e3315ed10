#pragma once
// The bodies of hvrun's fuzz targets, shared by the libFuzzer binaries (tests/fuzz/fuzz_*.cpp, built
// with HVRUN_FUZZ=ON) and by the regression test (tests/test_fuzz_regressions.cpp), which replays every
// committed input under tests/fuzz/corpus/<target>/ and tests/fuzz/regressions/<target>/.
//
// Contract of every entry: it feeds `input` to one parser and swallows exactly the exceptions that
// parser documents (ProtocolError for wire decoders, UsageError for what users type). Everything else
// escapes: another exception, or InvariantViolation when a property the parser promises does not hold
// (a round trip that changes the value, two ways of feeding the same bytes that disagree). Under
// libFuzzer an escaping exception ends in std::terminate, which the fuzzer reports as a crash and saves
// the input; under Catch it fails the test. Sanitizer reports and hangs are findings too.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace hvrun::fuzz {

// A promise of the code under test was broken. Deliberately not an hvrun::Error, so no entry swallows it.
class InvariantViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Throws InvariantViolation with `what` when `ok` is false.
inline void expect(bool ok, const std::string& what) {
  if (!ok) throw InvariantViolation("fuzz invariant broken: " + what);
}

// common/frame_codec.hpp's FrameDecoder fed in seeded chunkings, and decode_output
// (common/control_message.hpp). Input: 4 seed bytes, then the byte stream.
void frame_decoder(std::string_view input);
// common/control_message.hpp's decode_control on the whole input.
void control_message(std::string_view input);
// launcher/cli/host_list.hpp's parse_host_list on the whole input (one -H value).
void host_list(std::string_view input);
// launcher/cli/host_list.hpp's parse_hostfile on the whole input (a hostfile's contents).
void hostfile(std::string_view input);
// launcher/nic/nic_filter.hpp's NicFilter::parse; the input holds one --network-interface value per line.
void nic_filter(std::string_view input);
// launcher/cli/slurm_host_list.hpp: the first line as a host list, the rest as task counts.
void slurm_lists(std::string_view input);
// common/store_protocol.hpp's store::decode on the whole input (one store frame's payload).
void store_protocol(std::string_view input);
// common/probe_message.hpp's decode_probe_challenge and decode_probe_answer on the whole input.
void probe_message(std::string_view input);
// common/horovod_pickle.hpp's readers (replies, worker addresses raw and base64) and the Wire
// framing's open and seal, on the whole input.
void horovod_pickle(std::string_view input);
// A rank's own text: StderrDigest line by line, the failure report, and the autopsy's stack groups.
void rank_text(std::string_view input);
// common/horovod_rendezvous.hpp's HorovodRendezvous in elastic mode: the whole input written to it
// over one loopback TCP connection, its answers checked.
void elastic_http(std::string_view input);

struct Target {
  std::string_view name;  // also the directory name of its corpus, regressions and crashes
  void (*run)(std::string_view input);
};

inline constexpr Target kTargets[] = {
    {"frame_decoder", frame_decoder}, {"control_message", control_message}, {"host_list", host_list},
    {"hostfile", hostfile},           {"nic_filter", nic_filter},           {"store_protocol", store_protocol},
    {"slurm_lists", slurm_lists},     {"probe_message", probe_message},     {"rank_text", rank_text},
    {"horovod_pickle", horovod_pickle}, {"elastic_http", elastic_http},
};

// libFuzzer's bytes as the string_view the parsers take.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace hvrun::fuzz
