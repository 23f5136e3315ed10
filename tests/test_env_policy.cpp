// The environment ranks start from (launcher/ranks/env_policy.hpp): hvrun's own, then horovodrun's flags,
// then -x; another host gets it without what describes the launcher's host or terminal. (-x winning
// over the rank contract is test_user_env.cpp's.)
#include <catch2/catch.hpp>

#include "launcher/ranks/env_policy.hpp"

using hvrun::Environment;
using hvrun::EnvPolicy;
using hvrun::LaunchOptions;

TEST_CASE("env policy: hvrun's environment, then horovodrun's flags, then -x", "[env_policy]") {
  LaunchOptions o;
  o.horovod_env = {{"HOROVOD_FUSION_THRESHOLD", "1024"}, {"HOROVOD_CYCLE_TIME", "5"}};
  o.env = {{"HOROVOD_CYCLE_TIME", "7"}, {"DATA", "/data"}, {"HOME", std::nullopt}, {"NOWHERE", std::nullopt}};
  const EnvPolicy p({{"HOME", "/root"}, {"PATH", "/bin"}, {"HOROVOD_FUSION_THRESHOLD", "1"}}, o);
  const Environment expected{{"HOME", "/root"},
                             {"PATH", "/bin"},
                             {"HOROVOD_FUSION_THRESHOLD", "1024"},
                             {"HOROVOD_CYCLE_TIME", "7"},
                             {"DATA", "/data"}};
  CHECK(p.local() == expected);
  CHECK(p.remote() == expected);
  CHECK(p.unset() == std::vector<std::string>{"NOWHERE"});
  CHECK(p.user() == Environment{{"HOROVOD_CYCLE_TIME", "7"}, {"DATA", "/data"}, {"HOME", "/root"}});
}

TEST_CASE("env policy: another host gets no variable that describes the launcher's host or terminal",
          "[env_policy]") {
  const Environment launcher{{"HOSTNAME", "login1"}, {"PWD", "/home/u"},      {"SSH_CONNECTION", "1 2 3 4"},
                             {"TERM", "xterm"},      {"TERM_PROGRAM", "x"},   {"BASH_FUNC_f%%", "() { :; }"},
                             {"XDG_RUNTIME_DIR", "/run/user/0"},              {"_", "/usr/bin/hvrun"},
                             {"PATH", "/bin"},       {"TERMINFO_DIRS", "/t"}, {"CUDA_VISIBLE_DEVICES", "0"}};
  LaunchOptions o;
  o.env = {{"PWD", "/work"}};  // -x names it: the user wants it everywhere
  const EnvPolicy p(launcher, o);
  CHECK(p.local().size() == launcher.size());
  CHECK(p.local().at("PWD") == "/work");
  CHECK(p.remote() == Environment{{"PATH", "/bin"}, {"TERMINFO_DIRS", "/t"}, {"CUDA_VISIBLE_DEVICES", "0"}});
  // -x still wins over the rank contract on every host, through user().
  CHECK(p.user() == Environment{{"PWD", "/work"}});
  CHECK(p.forwarded_names() == std::vector<std::string>{"CUDA_VISIBLE_DEVICES", "PATH", "TERMINFO_DIRS"});
  for (const char* name : {"HOSTNAME", "SHLVL", "DISPLAY", "COLUMNS", "LINES", "SSH_AUTH_SOCK", "XDG_SESSION_ID",
                           "WINDOWID", "OLDPWD"})
    CHECK(hvrun::host_specific(name));
  for (const char* name : {"PATH", "HOME", "TERMINFO", "NCCL_DEBUG", "SSH"}) CHECK_FALSE(hvrun::host_specific(name));
}
