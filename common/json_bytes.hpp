#pragma once
// Control messages carry bytes, not text: on POSIX an argument, an environment variable, a working
// directory or a host's interface name is any sequence of bytes, and JSON strings must be UTF-8.
// These two functions make every string of a control message binary-safe at once:
//
//   a string value that is not valid UTF-8 (or starts with NUL)  →  {"\u0000": "<base64 of the bytes>"}
//   an object key of that kind                                 →  "\u0000<base64 of the bytes>"
//
// Text that is valid UTF-8 stays as it is (the common case costs nothing and stays readable in a
// trace). No string of hvrun's own starts with NUL, so the forms cannot be mistaken for text; a real
// string that starts with NUL is itself sent in the bytes form, so nothing is ambiguous.
#include <string>

#include <nlohmann/json.hpp>

namespace hvrun {

// j.dump(), with the strings and keys that JSON cannot carry turned into the bytes form.
std::string dump_bytes_safe(const nlohmann::json& j);

// Turns every bytes form inside `j` back into its string. Throws ProtocolError naming `peer` for a
// bytes form whose base64 is malformed.
void restore_bytes(nlohmann::json& j, const std::string& peer);

}  // namespace hvrun
