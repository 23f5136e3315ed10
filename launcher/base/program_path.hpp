#pragma once
// Finding a program as execvp would, for messages and checks made before anything is started.
#include <optional>
#include <string>
#include <string_view>

namespace hvrun {

// The path of `name` in the first directory of $PATH (/usr/bin:/bin when unset; an empty entry is the
// current directory) where it is executable; nullopt when none has it.
std::optional<std::string> find_program(std::string_view name);

}  // namespace hvrun
