#pragma once
// What a file holds: its SHA-256 (the launcher's check of the agent copy it keeps on a host, the
// agent's fingerprint of the program and script ranks will run), or its first bytes.
#include <cstddef>
#include <string>

namespace hvrun {

// Lowercase hex SHA-256 of a file's contents; throws SystemError naming the file.
std::string sha256_file(const std::string& path);

// At most `limit` bytes from the start of the file at `path`, read as they come (a /proc or /sys file
// says size 0 or 4096 whatever it holds); empty when it is missing or unreadable. No buffer of `limit`
// bytes is made: an agent reads a dozen of these at its start, and zeroing 64 KiB for each cost page
// faults a small file never needed.
std::string read_file_head(const std::string& path, std::size_t limit);

}  // namespace hvrun
