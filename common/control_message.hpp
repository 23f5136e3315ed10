#pragma once
// The control messages between launcher and agent. Each is one JSON object with a "type" field, sent
// in a control frame; rank output travels separately in output frames (see encode_output).
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/interface_list.hpp"
#include "common/probe_message.hpp"

namespace hvrun {

// Raised whenever a control message changes (a field added, removed or changing meaning). HelloMsg
// carries it and the launcher refuses an agent of another one, so neither side misreads the other.
// An agent whose hello lacks it speaks version 1.
inline constexpr int kControlVersion = 9;

// launcher → agent, first message: the job's secret and how often each side must hear the other.
// Either side that hears nothing for heartbeat_ms decides the other is gone.
struct JobMsg {
  std::string secret;  // JobSecret::hex(); never logged
  int heartbeat_ms = 0;
  int host_index = 0;        // this host's identity in probes
  bool serve_store = false;  // this host (rank 0's) serves the job's rendezvous store
  bool report_cpu = false;   // --stall-timeout: heartbeats carry the ranks' CPU (HeartbeatMsg::cpu_ms)
  bool elastic = false;      // Horovod elastic: more launches follow the first, each with new ranks
  bool observe = true;       // observe the ranks (RankObserver) and send ObservationMsg; off: --no-straggler-watch
  // --mpi, when hvrun runs mpirun itself and observes: the value of HVRUN_MPI_MARKER in the environment
  // of the job's MPI ranks, which mpirun's daemons start (not the agent): the agent finds them by it
  // (MpiRankFinder) and answers with its crash handler's paths (ReadyMsg). Empty otherwise.
  std::string mpi_marker{};
};

// agent → launcher, answer to JobMsg: the agent now answers probes as its host; store_port is where it
// serves the job's rendezvous store (0 when JobMsg gave no store token).
struct ReadyMsg {
  int store_port = 0;
  // With JobMsg::mpi_marker: this host's libhvrun_crash.so and the directory its ranks answer in (mpirun
  // passes them to this host's ranks); empty without, or where the agent could not make them.
  std::string rank_library{};
  std::string stack_dir{};
};

// launcher → rank 0's host's agent, after the NIC choice and before the launch: serve Horovod's Gloo
// rendezvous (common/horovod_rendezvous.hpp) on `address` (the chosen NIC's IPv4 address) for
// connections from `allowed_peers` (the IPv4 addresses of the job's hosts), for the rest of the job.
struct HorovodRendezvousMsg {
  std::string address;
  std::vector<std::string> allowed_peers;
};

// agent → launcher, answer to HorovodRendezvousMsg: it listens on `port`. An agent that cannot listen
// sends FatalMsg instead.
struct HorovodRendezvousReadyMsg {
  int port = 0;
};

// launcher → agent of an elastic job's newcomer, before its admission: reach hvrun's rendezvous at
// address:port and present `token` (HorovodRendezvous::expect_knock), within timeout_ms. The
// rendezvous learns the source address this host's connections arrive from (a NAT between them
// rewrites it), and the launcher that this host's workers can reach it at all.
struct KnockMsg {
  std::string address;
  int port = 0;
  std::string token;  // HorovodRendezvous::kKnockTokenSize hex characters; never logged
  int timeout_ms = 0;
};

// agent → launcher, answer to KnockMsg: `ok` once the rendezvous answered 200, else `detail` says
// what went wrong ("Connection refused", "no answer within 5 s", "answered 403").
struct KnockResultMsg {
  bool ok = false;
  int elapsed_ms = 0;
  std::string detail;
};

// agent → launcher, at any time after the job message: a warning for the user about what strangers did
// to the agent's listeners (common/throttled_log.hpp: said a few times with a count), which hvrun
// prints on its stderr; an agent's own stderr reaches nobody when it came over SSH.
struct NoticeMsg {
  std::string text;
};

// One rank's shares of an observation window, in thousandths of the window's wall time (the wire carries
// ints only): agent/rank_sampler.hpp's ObservedShares.
struct RankObservation {
  int rank = 0;
  int busy = 0;      // on a CPU
  int starved = 0;   // runnable, not running (run queue, cgroup quota)
  int waiting = 0;   // blocked on peers: a collective
  int own_data = 0;  // blocked on its own input: a file or pipe read, the disk, a sleep
  int cpu_limit = 0; // the CPUs its cgroup's quota allows, in thousandths (0: no quota)
  long long cpu_ms = 0;  // CPU time of all its threads in the window
  long long rss_kb = 0;  // resident set at the window's end
  // Its slowest and its fastest TCP connection that sent data in the window: the kernel's delivery rate
  // (KB/s, 0: none sent) and the peer's address (no port).
  long long send_rate_kbs = 0;
  std::string send_peer;
  long long fast_rate_kbs = 0;
  std::string fast_peer;
  // Through NVML where the host has NVIDIA GPUs: its mean SM utilisation in the window (percent, -1: no
  // GPU use known) and the device memory it holds (MiB).
  int gpu_percent = -1;
  long long gpu_mib = 0;
};

// agent → launcher, every observation window while ranks run (issue 40): each running rank's shares of
// it, for the launcher's StragglerWatch (launcher/job/straggler_watch.hpp).
struct ObservationMsg {
  int window_ms = 0;
  std::vector<RankObservation> ranks;
};

// An address of another host for this agent to probe.
struct ProbeAddress {
  int host = 0;  // index of the host that should answer
  std::string iface;
  std::string address;
  int port = 0;  // that host's probe port
};

// launcher → agent: probe these addresses, all at once, each within timeout_ms.
struct ProbeRequestMsg {
  std::vector<ProbeAddress> targets;
  int timeout_ms = 1000;
};

// agent → launcher: one probe's outcome, on the wire its word (to_string, common/probe_message.hpp):
// "ok", "refused", "timeout", "unreachable", "wrong-host", "auth-failed"; any other word is refused at
// decode. answered_as: the host index that answered instead (wrong-host), else -1.
struct ProbeResultMsg {
  int host = 0;
  std::string iface;
  std::string address;
  ProbeOutcome outcome = ProbeOutcome::kTimeout;
  int answered_as = -1;
  int elapsed_ms = 0;
  std::string detail;  // strerror or what was wrong with the answer; "" for ok
};

// launcher → agent, once the NICs are chosen and before the launch: measure what this host's chosen NIC
// carries to each target (the peer's chosen address and its probe port; ProbeAddress::iface is the
// peer's chosen NIC), all at once (agent/link_tester.hpp): send raw bytes until max_bytes are sent or
// max_ms have passed, each pair within timeout_ms in all.
struct LinkTestRequestMsg {
  std::vector<ProbeAddress> targets;
  int max_bytes = 0;
  int max_ms = 0;
  int timeout_ms = 0;
};

// agent → launcher: one target's figure: the bytes its listener confirmed and the microseconds from the
// first byte to its answer; or `error` (the connect's error, "no answer within 2 s", a bad MAC), then
// bytes and micros are 0.
struct LinkTestResultMsg {
  int host = 0;
  std::string address;
  int bytes = 0;
  int micros = 0;
  std::string error;
};

// both ways, every heartbeat_ms / 4 (whatever else is sent); every frame received rearms the watchdog.
// Either way, every heartbeat interval. From an agent told JobMsg::report_cpu, `cpu_ms`: the CPU time its
// ranks' process groups used since its previous heartbeat (what --stall-timeout counts as activity);
// else 0, which spares the agent a pass over /proc per heartbeat.
struct HeartbeatMsg {
  int cpu_ms = 0;
};

// agent → launcher, first message: who and where the agent is.
struct HelloMsg {
  std::string version;
  std::string hostname;  // gethostname() on the agent's host
  int pid = 0;
  int free_port = 0;     // a TCP port free on this host (MASTER_PORT when rank 0 lives here)
  int probe_port = 0;    // where this agent answers probes, on all its addresses
  std::vector<InterfaceInfo> interfaces;
  // From SSH_CONNECTION: the launcher's address as this host saw it, and the address this host was
  // reached on; empty for a local agent.
  std::string ssh_client_address;
  std::string ssh_server_address;
  // network_stack_identity(): equal on two agents when they share one network stack (one host).
  std::string network_stack;
  int control_version = kControlVersion;  // the control messages this agent speaks
};

struct RankLaunch {
  int rank = 0;
  std::map<std::string, std::string> env;  // the rank contract; overrides LaunchMsg::env
};

// launcher → agent, after JobMsg, when the job has a command: what would ranks started with `argv` in
// `cwd` with `env` (the launch's common environment, LaunchMsg::env) run on this host? The agent answers
// with FingerprintMsg while the probes run (agent/fingerprint.hpp).
struct FingerprintRequestMsg {
  std::vector<std::string> argv;
  std::string cwd;
  std::map<std::string, std::string> env;
};

// agent → launcher: what the ranks would run on this host. A string is "" where it does not apply or
// could not be learnt; the launcher compares hosts and words the differences (launcher/check/
// fingerprint_report.hpp).
struct FingerprintMsg {
  std::string cwd_error;       // strerror when the working directory cannot be entered; then nothing else
  std::string program;         // argv[0] as exec would find it; "" when it would not
  std::string program_sha256;  // a program that is not an interpreter, up to kFingerprintHashLimit bytes
  std::string script;          // an interpreter's script (python X.py), as an absolute path
  std::string script_sha256;   // "" with script_error when it cannot be read
  std::string script_error;    // strerror of the failed open or stat, "not a regular file"
  std::string python;          // the interpreter's version, "3.11.2"
  std::map<std::string, std::string> packages;  // distribution name → version, from package metadata
  std::string nccl;            // "2.28.9"
  std::string cuda;            // "13.0"
  int gpus = -1;               // NVIDIA GPUs the driver lists; -1: no NVIDIA driver
};

// One file of the launcher's --sync directories (launcher/start/sync_manifest.hpp) as the launcher holds
// it. `size` is decimal text: every number of a control message is an int, and a file may exceed one.
struct SyncFile {
  std::string path;  // absolute, and the same on every host
  std::string size;
  std::string sha256;
};

// launcher → agent, after JobMsg and before the fingerprint request, with --sync: which of these files
// does this host lack or hold with other contents? The agent answers with SyncNeedMsg (agent/sync_check.hpp)
// and keeps answering probes meanwhile.
struct SyncCheckMsg {
  std::vector<SyncFile> files;
};

// agent → launcher: the indexes into SyncCheckMsg::files of those missing here, of another size or
// SHA-256, or unreadable; ascending. The launcher then copies those over SFTP.
struct SyncNeedMsg {
  std::vector<int> need;
};

// launcher → agent: start these ranks.
struct LaunchMsg {
  std::string cwd;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // common to all ranks
  std::vector<RankLaunch> ranks;
};

// agent → launcher: a rank's process exists.
struct StartedMsg {
  int rank = 0;
  int pid = 0;
};

// agent → launcher: a rank ended. `signal` is non-zero when it was killed; `error` is set when it
// never ran (exit_code 127 for a command that cannot be executed).
// `cause`: what the agent knows of why a killed rank died ("killed by the kernel's OOM killer ..."), ""
// when nothing; `peak_rss_kb`: the rank's largest resident set (wait4's ru_maxrss), 0 when unknown.
struct ExitedMsg {
  int rank = 0;
  int exit_code = 0;
  int signal = 0;
  std::string error;
  std::string cause;
  int peak_rss_kb = 0;
  long long cpu_ms = 0;  // its CPU time (wait4's user + system), 0 when unknown
};

// agent → launcher: the agent cannot do what it was asked (e.g. the working directory is missing).
struct FatalMsg {
  std::string error;
};

// launcher → agent: stop the ranks: SIGTERM to each process group, SIGKILL after grace_ms.
struct TerminateMsg {
  int grace_ms = 0;
  // Empty: every rank (SIGTERM, SIGKILL after grace_ms). Otherwise only these ranks' groups, with SIGKILL
  // at once, grace_ms unused: an elastic worker that hvrun replaces (nothing of it is kept).
  std::vector<int> ranks;
};

// launcher → agent: send every running rank's stacks (agent/stack_collector.hpp) within timeout_ms,
// before hvrun stops the ranks (the hang autopsy).
struct StacksRequestMsg {
  int timeout_ms = 0;
};

// One rank's stacks: for each process of its group, a stack file's text (common/crash_report.hpp)
// or what /proc says of a process that gave none.
struct RankStack {
  int rank = 0;
  std::string text;
};

// agent → launcher: the answer to a StacksRequestMsg, every rank of the host that was running.
struct StacksMsg {
  std::vector<RankStack> ranks;
};

// launcher → agent, --max-restarts: every rank of this host has exited (each reported), and the job
// starts them again as attempt `attempt` (1 for the first restart). The agent forgets its Horovod
// rendezvous and, when `serve_store` (this host now runs rank 0), serves a fresh store; then it
// answers RestartReadyMsg and takes a new LaunchMsg. Refused before the launch, or while a rank of
// this host still runs.
struct RestartMsg {
  int attempt = 0;
  bool serve_store = false;
};

// agent → launcher, the answer to RestartMsg: a port free now (the attempt's MASTER_PORT when rank 0
// runs here) and the fresh store's (0 when not serving).
struct RestartReadyMsg {
  int free_port = 0;
  int store_port = 0;
};

// launcher → agent: the job is over; kill what is left of the ranks' groups and exit.
struct ShutdownMsg {};

// launcher → agent: `bytes` more of the agent's output payload has been taken in. An agent keeps at
// most kOutputWindow bytes of output unacknowledged, then stops reading its ranks' pipes until acks
// come (the ranks block on their writes): the launcher's memory stays bounded however fast ranks
// print and however slowly hvrun's stdout is read, and heartbeats keep flowing meanwhile.
struct OutputAckMsg {
  int bytes = 0;
};
inline constexpr std::size_t kOutputWindow = 1u << 20;

using ControlMessage =
    std::variant<JobMsg, ReadyMsg, HeartbeatMsg, HelloMsg, ProbeRequestMsg, ProbeResultMsg, LaunchMsg, StartedMsg, ExitedMsg, FatalMsg, TerminateMsg, ShutdownMsg, OutputAckMsg,
                 HorovodRendezvousMsg, HorovodRendezvousReadyMsg, StacksRequestMsg, StacksMsg, FingerprintRequestMsg,
                 FingerprintMsg, SyncCheckMsg, SyncNeedMsg, RestartMsg, RestartReadyMsg, KnockMsg, KnockResultMsg, NoticeMsg,
                 ObservationMsg, LinkTestRequestMsg, LinkTestResultMsg>;

// `interfaces` as HelloMsg carries them on the wire (every field of InterfaceInfo): the launcher's probe
// cache keys on it, so a field added there changes the key with it.
std::string encode_interfaces(const std::vector<InterfaceInfo>& interfaces);

std::string encode_control(const ControlMessage& msg);
// Throws ProtocolError naming `peer` for malformed JSON, an unknown type or missing/mistyped fields
// (a number that is not an integer in int's range is mistyped: every number of these messages is an int).
ControlMessage decode_control(std::string_view payload, const std::string& peer);

enum class OutputStream : unsigned char { kStdout = 1, kStderr = 2 };

struct OutputChunk {
  int rank = 0;
  OutputStream stream = OutputStream::kStdout;
  std::string bytes;
};

// Output frame payload: 4-byte big-endian rank, 1-byte stream, raw bytes.
std::string encode_output(int rank, OutputStream stream, std::string_view bytes);
OutputChunk decode_output(std::string_view payload, const std::string& peer);

}  // namespace hvrun
