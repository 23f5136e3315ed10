#pragma once
// --sync DIR: the launcher's side of making directories the same on every host before the ranks start.
// The manifest lists every regular file under the directories (their sizes, modes and SHA-256), each
// host's agent answers which of them it lacks or holds otherwise (SyncCheckMsg, agent/sync_check.hpp),
// and only those are copied over the host's SFTP (file_sender.hpp). Files on a host that the launcher
// lacks are left alone (rsync's default: nothing is deleted); symbolic links and special files are not
// sent, and are named.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/control_message.hpp"
#include "launcher/ssh/ssh_session.hpp"

namespace hvrun {

// The most files one --sync may list: their list travels in one control frame (kMaxFramePayload).
inline constexpr std::size_t kSyncMaxFiles = 20'000;

struct SyncManifest {
  std::vector<SyncFile> files;        // absolute paths, sorted, each once
  std::vector<std::uint32_t> modes;   // their permission bits, parallel to files
  std::vector<std::uint64_t> sizes;   // parallel to files
  std::uint64_t total_bytes = 0;
  std::vector<std::string> skipped;   // symbolic links and special files under the directories, not sent
};

// Lists and hashes every regular file under `dirs` (each made absolute against the working directory).
// Throws UsageError naming the --sync directory that does not exist or is not a directory, or, before
// hashing anything, that the files add up to more than `limit` bytes (--sync-limit) or number more than
// kSyncMaxFiles.
SyncManifest sync_manifest(const std::vector<std::string>& dirs, std::uint64_t limit);

// The copies that bring a host up to date: the manifest's files at `need` (SyncNeedMsg::need), each to
// its own path. Throws ProtocolError naming `peer` for an index out of range or out of order.
std::vector<FileCopy> sync_copies(const SyncManifest& manifest, const std::vector<int>& need, const std::string& peer);

// What `f` will say once the host has the manifest's files: a script the manifest holds is there, with
// the manifest's SHA-256 (--check-only compares hosts as the launch would find them, copying nothing).
FingerprintMsg after_sync(FingerprintMsg f, const SyncManifest& manifest);

// How long one host's copies may take: `base` (--start-timeout) and one second per MiB, a floor of
// 1 MiB/s that any working link beats.
std::chrono::milliseconds sync_timeout(std::uint64_t bytes, std::chrono::milliseconds base);

// "1572864 bytes (1.5 MiB)"; below 1 MiB only the bytes.
std::string byte_count_text(std::uint64_t bytes);

// One host's outcome, for the summary.
struct HostSync {
  std::string host;
  std::size_t files = 0;  // files copied to it (or, under --check-only, that it lacks)
  std::uint64_t bytes = 0;
};

// The line after every host's check (and copies): "--sync: sent 2 files, 1572864 bytes (1.5 MiB), to
// lab1; lab[0,2] already had all 3" or, under --check-only, "would send". Hosts with the same counts
// are folded together.
std::string sync_summary(const SyncManifest& manifest, const std::vector<HostSync>& hosts, bool check_only);

}  // namespace hvrun
