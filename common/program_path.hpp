#pragma once
// Finding a program as execvp would, for messages and checks made before anything is started: the
// launcher's own checks (mpirun, horovodrun's flags) and the agent's fingerprint of what ranks will run.
#include <optional>
#include <string>
#include <string_view>

namespace hvrun {

// The path of `name` in the first directory of `path` (a $PATH value; nullopt: this process's $PATH, and
// /usr/bin:/bin when that is unset; an empty entry is the current directory) where it is executable;
// nullopt when none has it.
std::optional<std::string> find_program(std::string_view name, std::optional<std::string_view> path = std::nullopt);

}  // namespace hvrun
