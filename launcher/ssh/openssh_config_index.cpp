#include "launcher/ssh/openssh_config_index.hpp"

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace hvrun {

namespace {

constexpr int kMaxIncludeDepth = 16;  // OpenSSH's READCONF_MAX_DEPTH

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// OpenSSH's match_pattern: '*' any run of characters, '?' any one; nothing else is special.
bool wildcard_match(const std::string& pattern, const std::string& text) {
  std::size_t p = 0, t = 0, star = std::string::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// A % token whose expansion differs between hosts (anything but the local user, home, uid, local host
// name and a literal %).
bool names_host(const std::string& value) {
  for (std::size_t i = value.find('%'); i != std::string::npos; i = value.find('%', i + 2)) {
    if (i + 1 >= value.size() || std::string_view("%duilL").find(value[i + 1]) == std::string_view::npos)
      return true;
  }
  return false;
}

bool is_read_by_hvrun(const std::string& keyword) {
  static const std::vector<std::string> kRead{"hostname",           "user",         "port",
                                              "identityfile",       "userknownhostsfile",
                                              "globalknownhostsfile", "stricthostkeychecking",
                                              "proxycommand",       "proxyjump",    "hostkeyalias"};
  return std::find(kRead.begin(), kRead.end(), keyword) != kRead.end();
}

}  // namespace

OpenSshConfigIndex OpenSshConfigIndex::read(const std::string& config_file, const std::string& home,
                                            const std::string& system_file) {
  OpenSshConfigIndex index;
  index.home_ = home;
  const std::string user_dir = home + "/.ssh";
  if (!config_file.empty()) {
    // ssh -F: that file alone, read as the user's; one that cannot be read is ssh's own error to give.
    if (!std::ifstream(config_file)) index.unshared_ = true;
    index.read_file(config_file, user_dir, 0);
    return index;
  }
  index.read_file(user_dir + "/config", user_dir, 0);
  index.read_file(system_file, system_file.substr(0, system_file.rfind('/')), 0);
  return index;
}

void OpenSshConfigIndex::read_file(const std::string& path, const std::string& relative_to, int depth) {
  if (depth > kMaxIncludeDepth) {
    unshared_ = true;
    return;
  }
  std::ifstream in(path);
  if (!in) return;  // a missing file is skipped, as OpenSSH skips it
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    unshared_ = true;
    return;
  }
  contents_ += path + '\0' + text.str() + '\0';
  int block = -1;  // every file starts outside any Host block
  std::istringstream lines(text.str());
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    std::size_t end = line.find_first_of(" \t=", start);
    const std::string keyword = lower(line.substr(start, end - start));
    std::string rest = end == std::string::npos ? "" : line.substr(end);
    const std::size_t value_at = rest.find_first_not_of(" \t");
    rest = value_at == std::string::npos ? "" : rest.substr(value_at);
    if (!rest.empty() && rest.front() == '=') rest = rest.substr(std::min(rest.size(), rest.find_first_not_of(" \t", 1)));
    std::vector<std::string> args;
    std::istringstream words(rest);
    for (std::string w; words >> w;) args.push_back(w);

    if (keyword == "match") {
      unshared_ = true;
    } else if (keyword == "host") {
      if (rest.find('"') != std::string::npos) unshared_ = true;
      block = static_cast<int>(hosts_.size());
      hosts_.push_back({args});
    } else if (keyword == "include") {
      if (block != -1 || rest.find('"') != std::string::npos) {
        unshared_ = true;
        continue;
      }
      for (const std::string& arg : args) {
        std::string pattern = arg.rfind("~/", 0) == 0 ? home_ + arg.substr(1) : arg;
        if (pattern.front() != '/') pattern = relative_to + "/" + pattern;
        glob_t found{};
        const int rc = ::glob(pattern.c_str(), 0, nullptr, &found);
        if (rc == 0)
          for (std::size_t i = 0; i < found.gl_pathc; ++i) read_file(found.gl_pathv[i], relative_to, depth + 1);
        else if (rc != GLOB_NOMATCH)
          unshared_ = true;
        ::globfree(&found);
      }
    } else if (keyword == "canonicalizehostname") {
      if (args.empty() || lower(args.front()) != "no") unshared_ = true;
    } else if (is_read_by_hvrun(keyword)) {
      settings_.push_back({block, keyword, keyword == "hostname", names_host(rest)});
    }
  }
}

bool OpenSshConfigIndex::matches(const HostLine& line, const std::string& host) {
  bool matched = false;
  for (const std::string& p : line.patterns) {
    const bool negated = !p.empty() && p.front() == '!';
    if (!wildcard_match(negated ? p.substr(1) : p, host)) continue;
    if (negated) return false;  // a negated match excludes the host whatever else matches
    matched = true;
  }
  return matched;
}

std::optional<OpenSshConfigIndex::Sharing> OpenSshConfigIndex::sharing(const std::string& host) const {
  if (unshared_ || host.empty() || host.front() == '-') return std::nullopt;
  for (const unsigned char c : host)
    if (std::isupper(c) || std::isspace(c) || std::string_view("@%[]/").find(static_cast<char>(c)) != std::string_view::npos)
      return std::nullopt;
  std::vector<bool> matched(hosts_.size());
  Sharing s{contents_, false};
  for (std::size_t i = 0; i < hosts_.size(); ++i) {
    matched[i] = matches(hosts_[i], host);
    s.key += matched[i] ? '1' : '0';
  }
  for (const Setting& setting : settings_) {
    if (setting.block >= 0 && !matched[static_cast<std::size_t>(setting.block)]) continue;
    if (setting.names_host) return std::nullopt;
    s.names_hostname = s.names_hostname || setting.is_hostname;
  }
  return s;
}

bool OpenSshConfigIndex::may_set(const std::string& host, const std::string& keyword) const {
  const bool judged = sharing(host).has_value();
  for (const Setting& setting : settings_) {
    if (setting.keyword != keyword) continue;
    if (!judged || setting.block < 0 || matches(hosts_[static_cast<std::size_t>(setting.block)], host)) return true;
  }
  return false;
}

}  // namespace hvrun
