#pragma once
// The SHA-256 of a file's contents: the launcher's check of the agent copy it keeps on a host, and the
// agent's fingerprint of the program and script ranks will run.
#include <string>

namespace hvrun {

// Lowercase hex SHA-256 of a file's contents; throws SystemError naming the file.
std::string sha256_file(const std::string& path);

}  // namespace hvrun
