#include "tests/support/neighbour_user.hpp"

#include <pwd.h>

#include <stdexcept>

namespace hvrun::test {

namespace {

void remove_user(const std::string& name) {
  run({"/usr/bin/pkill", "-KILL", "-u", name}, std::chrono::seconds(10));
  run({"/usr/sbin/userdel", name}, std::chrono::seconds(30));
}

}  // namespace

NeighbourUser::NeighbourUser(const std::string& tag) : name_("hvnb-" + tag) {
  if (name_.size() > 32) name_.resize(32);  // useradd's limit on a user name
  if (::getpwnam(name_.c_str()) != nullptr) remove_user(name_);
  // hvrun::test::run, not the member run() (which would run it as the user not yet made).
  const ChildResult made = hvrun::test::run(
      {"/usr/sbin/useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", name_},
      std::chrono::seconds(30));
  if (made.exit_code != 0) throw std::runtime_error("useradd " + name_ + " failed: " + made.err);
  const passwd* pw = ::getpwnam(name_.c_str());
  if (pw == nullptr) {
    remove_user(name_);
    throw std::runtime_error("useradd " + name_ + " succeeded but getpwnam finds no such user");
  }
  uid_ = pw->pw_uid;
  gid_ = pw->pw_gid;
}

NeighbourUser::~NeighbourUser() { remove_user(name_); }

ChildResult NeighbourUser::run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) const {
  std::vector<std::string> full = {"/usr/bin/setpriv", "--reuid=" + std::to_string(uid_), "--regid=" + std::to_string(gid_),
                                   "--clear-groups", "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  return hvrun::test::run(full, timeout);
}

void NeighbourUser::give(const std::string& path, bool recursive) const {
  std::vector<std::string> argv = {"/bin/chown"};
  if (recursive) argv.push_back("-R");
  argv.push_back(std::to_string(uid_) + ":" + std::to_string(gid_));
  argv.push_back(path);
  const ChildResult r = hvrun::test::run(argv, std::chrono::seconds(30));
  if (r.exit_code != 0) throw std::runtime_error("chown " + path + " to " + name_ + " failed: " + r.err);
}

}  // namespace hvrun::test
