#include "launcher/check/fingerprint_report.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "launcher/base/host_names.hpp"

namespace hvrun {

namespace {

std::string basename_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The directory of an absolute path, for the --sync hint ("/" for a file at the root).
std::string parent_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? std::string("/") : path.substr(0, slash);
}

std::string short_hash(const std::string& sha256) {
  return sha256.empty() ? std::string("unreadable") : "sha256 " + sha256.substr(0, 12);
}

// Hosts grouped by `value_of`, smallest group first (the odd hosts out), groups of one size in the
// order their first host comes.
std::vector<std::pair<std::string, std::vector<std::string>>> groups_by(
    const std::vector<HostFingerprint>& hosts, const std::function<std::string(const FingerprintMsg&)>& value_of) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const HostFingerprint& h : hosts) {
    const std::string v = value_of(h.fingerprint);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == v; });
    if (it == groups.end()) {
      groups.push_back({v, {h.host}});
    } else {
      it->second.push_back(h.host);
    }
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  return groups;
}

std::string or_none(const std::string& v) { return v.empty() ? std::string("none") : v; }

}  // namespace

FingerprintReport compare_fingerprints(const std::vector<HostFingerprint>& hosts, const std::vector<std::string>& argv,
                                       const std::string& cwd) {
  FingerprintReport report;
  if (hosts.empty() || argv.empty()) return report;
  const std::string& program = argv.front();

  // What would fail at once.
  std::vector<std::string> no_cwd, no_program;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> no_script;  // (script, error) -> hosts
  for (const HostFingerprint& h : hosts) {
    const FingerprintMsg& f = h.fingerprint;
    if (!f.cwd_error.empty()) {
      no_cwd.push_back(h.host);
    } else if (f.program.empty()) {
      no_program.push_back(h.host);
    } else if (!f.script.empty() && !f.script_error.empty()) {
      no_script[{f.script, f.script_error}].push_back(h.host);
    }
  }
  if (!no_cwd.empty())
    report.refusals.push_back("working directory '" + cwd + "' does not exist on " + fold_names(no_cwd) +
                              "; create it there or start hvrun from a directory every host has");
  if (!no_program.empty())
    report.refusals.push_back(
        fold_names(no_program) + ": " +
        (program.find('/') != std::string::npos
             ? program + " does not exist there or is not executable; install it there or fix the path"
             : "'" + program + "' is not on the ranks' PATH there; install it there, or give its full path"));
  for (const auto& [what, names] : no_script)
    report.refusals.push_back(fold_names(names) + ": the script " + what.first + " cannot be read there (" +
                              what.second + "); copy it there (--sync " + parent_of(what.first) +
                              " does), or start hvrun from a directory every host shares");
  if (!report.refusals.empty()) return report;

  // What differs. Each field: its name in the lines, and its value on a host.
  const FingerprintMsg& first = hosts.front().fingerprint;
  struct Field {
    std::string name;
    std::function<std::string(const FingerprintMsg&)> value;
    bool hash = false;  // a file's content: "differs (sha256 ...)"
    bool agreed = true;  // named in `same` when every host has one value (not the program's path)
    std::string hint = {};  // ends the line when hosts differ
  };
  std::vector<Field> fields{
      {basename_of(program) + " (the program)", [](const auto& f) { return f.program; }, false, false}};
  if (!first.program_sha256.empty() || !first.script.empty()) {
    if (first.script.empty())
      fields.push_back({basename_of(first.program), [](const auto& f) { return f.program_sha256; }, true});
    else
      fields.push_back({basename_of(first.script), [](const auto& f) { return f.script_sha256; }, true, true,
                        "; make it the same everywhere with --sync " + parent_of(first.script)});
  }
  fields.push_back({"Python", [](const auto& f) { return f.python; }});
  std::vector<std::string> packages;
  for (const HostFingerprint& h : hosts)
    for (const auto& [name, version] : h.fingerprint.packages)
      if (std::find(packages.begin(), packages.end(), name) == packages.end()) packages.push_back(name);
  for (const std::string& name : packages)
    fields.push_back({name, [name](const auto& f) {
                        const auto it = f.packages.find(name);
                        return it == f.packages.end() ? std::string() : it->second;
                      }});
  fields.push_back({"NCCL", [](const auto& f) { return f.nccl; }});
  fields.push_back({"CUDA", [](const auto& f) { return f.cuda; }});
  fields.push_back({"GPUs", [](const auto& f) { return f.gpus < 0 ? std::string() : std::to_string(f.gpus); }});

  std::vector<std::string> same;
  for (const Field& field : fields) {
    const auto groups = groups_by(hosts, field.value);
    if (groups.size() == 1) {
      const std::string& v = groups.front().first;
      if (!v.empty() && field.agreed) same.push_back(field.name + " " + (field.hash ? short_hash(v) : v));
      continue;
    }
    std::string line;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto& [value, names] = groups[g];
      std::string shown = field.hash ? short_hash(value) : or_none(value);
      if (g == 0) shown = field.hash ? field.name + " differs (" + shown + ")" : field.name + " " + shown;
      line += (g == 0 ? "" : "; ") + fold_names(names) + ": " + shown;
    }
    report.differences.push_back(line + field.hint);
  }
  for (const HostFingerprint& h : hosts)
    if (h.fingerprint.gpus > 0 && h.fingerprint.gpus < h.ranks)
      report.differences.push_back(h.host + ": " + std::to_string(h.ranks) + " ranks but " +
                                   std::to_string(h.fingerprint.gpus) + (h.fingerprint.gpus == 1 ? " GPU" : " GPUs"));
  for (const std::string& s : same) report.same += (report.same.empty() ? "" : ", ") + s;
  return report;
}

}  // namespace hvrun
