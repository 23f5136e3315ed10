#include "launcher/ranks/env_policy.hpp"

#include <string_view>

#include "launcher/ranks/user_env.hpp"

extern char** environ;

namespace hvrun {

Environment launcher_environment() {
  Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

bool host_specific(const std::string& name) {
  static const char* const exact[] = {"HOSTNAME", "PWD", "OLDPWD", "SHLVL", "DISPLAY", "TERM", "TERMCAP",
                                      "COLORTERM", "COLUMNS", "LINES", "XAUTHORITY", "_"};
  for (const char* e : exact)
    if (name == e) return true;
  for (const char* prefix : {"SSH_", "BASH_FUNC_", "TERM_", "WINDOWID", "XDG_SESSION_", "XDG_RUNTIME_DIR"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

namespace {

Environment without_host_specific(Environment env) {
  std::erase_if(env, [](const auto& kv) { return host_specific(kv.first); });
  return env;
}

}  // namespace

EnvPolicy::EnvPolicy(Environment launcher_env, const LaunchOptions& options)
    : launcher_(std::move(launcher_env)), local_(launcher_), user_(user_variables(options.env, launcher_)) {
  for (const auto& [name, value] : options.horovod_env) local_[name] = value;
  for (const auto& [name, value] : options.env) {
    if (value) {
      local_[name] = *value;
    } else if (!local_.count(name)) {
      unset_.push_back(name);
    }
  }
  remote_ = without_host_specific(local_);
}

std::vector<std::string> EnvPolicy::forwarded_names() const {
  std::vector<std::string> names;
  for (const auto& [name, value] : without_host_specific(launcher_)) names.push_back(name);
  return names;
}

}  // namespace hvrun
