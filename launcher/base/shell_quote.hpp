#pragma once
// Quoting for a POSIX shell (/bin/sh), for command lines hvrun builds: the remote agent's start script,
// a ProxyJump's `ssh -W` command, the printed `--mpi` line.
#include <string>
#include <vector>

namespace hvrun {

// `word` in single quotes; nothing inside is special but the quote itself ('\'' ).
std::string shell_quote(const std::string& word);

// The argv as one line for a POSIX shell: words with anything but [A-Za-z0-9_@%+=:,./-] single-quoted.
std::string shell_line(const std::vector<std::string>& argv);

// Splits `text` into words as a POSIX shell would (wordexp, command substitution refused). Throws
// UsageError naming `flag` on bad syntax.
std::vector<std::string> shell_words(const std::string& text, const std::string& flag);

}  // namespace hvrun
