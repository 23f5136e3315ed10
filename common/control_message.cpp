#include "common/control_message.hpp"

#include <climits>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_bytes.hpp"

namespace hvrun {

// With defaults: an interface from an agent of an earlier version (without `master`) still decodes,
// so the launcher can refuse that agent naming both versions.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(InterfaceInfo, name, addresses, prefix_lengths, up, running, loopback,
                                                is_virtual, speed_mbps, master)
std::string encode_interfaces(const std::vector<InterfaceInfo>& interfaces) {
  return nlohmann::json(interfaces).dump();
}

void to_json(nlohmann::json& j, const HelloMsg& m) {
  j = nlohmann::json{{"version", m.version},
                     {"hostname", m.hostname},
                     {"pid", m.pid},
                     {"free_port", m.free_port},
                     {"probe_port", m.probe_port},
                     {"interfaces", m.interfaces},
                     {"ssh_client_address", m.ssh_client_address},
                     {"ssh_server_address", m.ssh_server_address},
                     {"network_stack", m.network_stack},
                     {"control_version", m.control_version}};
}
// network_stack and control_version may be missing: a hello from an agent of an earlier version still
// decodes, so the launcher can refuse it naming both versions.
void from_json(const nlohmann::json& j, HelloMsg& m) {
  j.at("version").get_to(m.version);
  j.at("hostname").get_to(m.hostname);
  j.at("pid").get_to(m.pid);
  j.at("free_port").get_to(m.free_port);
  j.at("probe_port").get_to(m.probe_port);
  j.at("interfaces").get_to(m.interfaces);
  j.at("ssh_client_address").get_to(m.ssh_client_address);
  j.at("ssh_server_address").get_to(m.ssh_server_address);
  m.network_stack = j.contains("network_stack") ? j.at("network_stack").get<std::string>() : std::string();
  m.control_version = j.contains("control_version") ? j.at("control_version").get<int>() : 1;
}
// A probe outcome travels as its word. decode_body<ProbeResultMsg> has refused unknown words, naming the
// peer, before this runs.
void to_json(nlohmann::json& j, ProbeOutcome o) { j = to_string(o); }
void from_json(const nlohmann::json& j, ProbeOutcome& o) {
  const auto known = probe_outcome_from_text(j.get<std::string>());
  if (!known) throw nlohmann::json::other_error::create(501, "unknown probe outcome", &j);
  o = *known;
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankLaunch, rank, env)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LaunchMsg, cwd, argv, env, ranks)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StartedMsg, rank, pid)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ExitedMsg, rank, exit_code, signal, error, cause, peak_rss_kb, cpu_ms)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StacksRequestMsg, timeout_ms)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankStack, rank, text)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StacksMsg, ranks)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FatalMsg, error)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FingerprintRequestMsg, argv, cwd, env)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FingerprintMsg, cwd_error, program, program_sha256, script, script_sha256, script_error, python,
                                   packages, nccl, cuda, gpus)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SyncFile, path, size, sha256)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SyncCheckMsg, files)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SyncNeedMsg, need)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TerminateMsg, grace_ms, ranks)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RestartMsg, attempt, serve_store)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RestartReadyMsg, free_port, store_port)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OutputAckMsg, bytes)

// report_cpu, elastic, mpi_marker and a heartbeat's cpu_ms may be missing (then false and 0; observe then true): the agent does not check the
// launcher's version, and an earlier launcher's job and heartbeats must still be read.
void to_json(nlohmann::json& j, const JobMsg& m) {
  j = nlohmann::json{{"secret", m.secret},
                     {"heartbeat_ms", m.heartbeat_ms},
                     {"host_index", m.host_index},
                     {"serve_store", m.serve_store},
                     {"report_cpu", m.report_cpu},
                     {"elastic", m.elastic},
                     {"observe", m.observe}};
  if (!m.mpi_marker.empty()) j["mpi_marker"] = m.mpi_marker;
}
void from_json(const nlohmann::json& j, JobMsg& m) {
  j.at("secret").get_to(m.secret);
  j.at("heartbeat_ms").get_to(m.heartbeat_ms);
  j.at("host_index").get_to(m.host_index);
  j.at("serve_store").get_to(m.serve_store);
  m.report_cpu = j.contains("report_cpu") && j.at("report_cpu").get<bool>();
  m.elastic = j.contains("elastic") && j.at("elastic").get<bool>();
  m.observe = !j.contains("observe") || j.at("observe").get<bool>();
  m.mpi_marker = j.value("mpi_marker", std::string());
}
// The crash handler's paths go only with an MPI marker (and an earlier agent sends none).
void to_json(nlohmann::json& j, const ReadyMsg& m) {
  j = nlohmann::json{{"store_port", m.store_port}};
  if (!m.rank_library.empty()) j["rank_library"] = m.rank_library;
  if (!m.stack_dir.empty()) j["stack_dir"] = m.stack_dir;
}
void from_json(const nlohmann::json& j, ReadyMsg& m) {
  j.at("store_port").get_to(m.store_port);
  m.rank_library = j.value("rank_library", std::string());
  m.stack_dir = j.value("stack_dir", std::string());
}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HorovodRendezvousMsg, address, allowed_peers)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HorovodRendezvousReadyMsg, port)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KnockMsg, address, port, token, timeout_ms)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KnockResultMsg, ok, elapsed_ms, detail)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NoticeMsg, text)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankObservation, rank, busy, starved, waiting, own_data, cpu_limit, cpu_ms, rss_kb, send_rate_kbs, send_peer, fast_rate_kbs, fast_peer, gpu_percent, gpu_mib)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ObservationMsg, window_ms, ranks)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProbeAddress, host, iface, address, port)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProbeRequestMsg, targets, timeout_ms)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProbeResultMsg, host, iface, address, outcome, answered_as, elapsed_ms, detail)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LinkTestRequestMsg, targets, max_bytes, max_ms, timeout_ms)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LinkTestResultMsg, host, address, bytes, micros, error)

void to_json(nlohmann::json&, const ShutdownMsg&) {}
void from_json(const nlohmann::json&, ShutdownMsg&) {}
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(HeartbeatMsg, cpu_ms)

namespace {

template <typename T>
struct TypeName;
#define HVRUN_MESSAGE_NAME(T, name)                  \
  template <>                                        \
  struct TypeName<T> {                               \
    static constexpr const char* value = name;       \
  };
HVRUN_MESSAGE_NAME(JobMsg, "job")
HVRUN_MESSAGE_NAME(ReadyMsg, "ready")
HVRUN_MESSAGE_NAME(HeartbeatMsg, "heartbeat")
HVRUN_MESSAGE_NAME(HelloMsg, "hello")
HVRUN_MESSAGE_NAME(ProbeRequestMsg, "probe_request")
HVRUN_MESSAGE_NAME(ProbeResultMsg, "probe_result")
HVRUN_MESSAGE_NAME(LaunchMsg, "launch")
HVRUN_MESSAGE_NAME(StartedMsg, "started")
HVRUN_MESSAGE_NAME(ExitedMsg, "exited")
HVRUN_MESSAGE_NAME(FatalMsg, "fatal")
HVRUN_MESSAGE_NAME(TerminateMsg, "terminate")
HVRUN_MESSAGE_NAME(ShutdownMsg, "shutdown")
HVRUN_MESSAGE_NAME(OutputAckMsg, "output_ack")
HVRUN_MESSAGE_NAME(HorovodRendezvousMsg, "horovod_rendezvous")
HVRUN_MESSAGE_NAME(HorovodRendezvousReadyMsg, "horovod_rendezvous_ready")
HVRUN_MESSAGE_NAME(StacksRequestMsg, "stacks_request")
HVRUN_MESSAGE_NAME(StacksMsg, "stacks")
HVRUN_MESSAGE_NAME(FingerprintRequestMsg, "fingerprint_request")
HVRUN_MESSAGE_NAME(FingerprintMsg, "fingerprint")
HVRUN_MESSAGE_NAME(SyncCheckMsg, "sync_check")
HVRUN_MESSAGE_NAME(SyncNeedMsg, "sync_need")
HVRUN_MESSAGE_NAME(RestartMsg, "restart")
HVRUN_MESSAGE_NAME(RestartReadyMsg, "restart_ready")
HVRUN_MESSAGE_NAME(KnockMsg, "knock")
HVRUN_MESSAGE_NAME(KnockResultMsg, "knock_result")
HVRUN_MESSAGE_NAME(NoticeMsg, "notice")
HVRUN_MESSAGE_NAME(ObservationMsg, "observation")
HVRUN_MESSAGE_NAME(LinkTestRequestMsg, "link_test_request")
HVRUN_MESSAGE_NAME(LinkTestResultMsg, "link_test_result")
#undef HVRUN_MESSAGE_NAME

// A JSON value that is not a number, or a number an int holds exactly.
bool is_int(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT_MAX);
  if (v.is_number_integer()) return v.get<std::int64_t>() >= INT_MIN && v.get<std::int64_t>() <= INT_MAX;
  return !v.is_number();  // a float: never written by encode_control
}

// The message's fields from `j`; throws nlohmann's exceptions for missing or mistyped ones.
template <typename T>
T decode_body(const nlohmann::json& j, const std::string&) {
  return j.get<T>();
}
// An outcome word of no ProbeOutcome is named as such: "PEER: unknown probe outcome 'WORD'".
template <>
ProbeResultMsg decode_body<ProbeResultMsg>(const nlohmann::json& j, const std::string& peer) {
  static_cast<void>(parse_probe_outcome(j.at("outcome").get<std::string>(), peer));
  return j.get<ProbeResultMsg>();
}

template <std::size_t I = 0>
ControlMessage decode_as(const std::string& type, const nlohmann::json& j, const std::string& peer) {
  if constexpr (I == std::variant_size_v<ControlMessage>) {
    throw ProtocolError(peer + ": unknown control message type '" + type + "'");
  } else {
    using T = std::variant_alternative_t<I, ControlMessage>;
    if (type == TypeName<T>::value) return decode_body<T>(j, peer);
    return decode_as<I + 1>(type, j, peer);
  }
}

}  // namespace

std::string encode_control(const ControlMessage& msg) {
  return std::visit(
      [](const auto& m) {
        nlohmann::json j = m;
        if (j.is_null()) j = nlohmann::json::object();
        j["type"] = TypeName<std::decay_t<decltype(m)>>::value;
        return dump_bytes_safe(j);
      },
      msg);
}

ControlMessage decode_control(std::string_view payload, const std::string& peer) {
  try {
    // Every number of every control message is an int (ranks, pids, ports, milliseconds). nlohmann
    // converts others silently (4294967297 to 1, 2.5 to 2) or with undefined behaviour (1e300), so the
    // parse itself notes the first number an int cannot hold, and the message is refused.
    std::string bad_number;
    auto j = nlohmann::json::parse(
        payload, [&bad_number](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          if (event == nlohmann::json::parse_event_t::value && bad_number.empty() && !is_int(parsed))
            bad_number = parsed.dump();
          return true;
        });
    if (!bad_number.empty())
      throw ProtocolError(peer + ": malformed control message: " + bad_number + " is not an integer of int's range");
    restore_bytes(j, peer);  // strings that are bytes, not UTF-8 (json_bytes.hpp)
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
      throw ProtocolError(peer + ": control message without a type");
    return decode_as(j["type"].get<std::string>(), j, peer);
  } catch (const nlohmann::json::exception& e) {
    throw ProtocolError(peer + ": malformed control message: " + e.what());
  }
}

std::string encode_output(int rank, OutputStream stream, std::string_view bytes) {
  std::string out;
  out.reserve(5 + bytes.size());
  const auto r = static_cast<std::uint32_t>(rank);
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((r >> shift) & 0xff));
  out.push_back(static_cast<char>(stream));
  out.append(bytes);
  return out;
}

OutputChunk decode_output(std::string_view payload, const std::string& peer) {
  if (payload.size() < 5) throw ProtocolError(peer + ": output frame shorter than its 5-byte header");
  std::uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r = (r << 8) | static_cast<unsigned char>(payload[i]);
  const auto stream = static_cast<unsigned char>(payload[4]);
  if (stream != static_cast<unsigned char>(OutputStream::kStdout) &&
      stream != static_cast<unsigned char>(OutputStream::kStderr))
    throw ProtocolError(peer + ": output frame for unknown stream " + std::to_string(stream));
  if (r > static_cast<std::uint32_t>(std::numeric_limits<int>::max()))
    throw ProtocolError(peer + ": output frame for impossible rank " + std::to_string(r));
  return OutputChunk{static_cast<int>(r), static_cast<OutputStream>(stream), std::string(payload.substr(5))};
}

}  // namespace hvrun
