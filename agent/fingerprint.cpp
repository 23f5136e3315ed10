#include "agent/fingerprint.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/child_process.hpp"
#include "common/error.hpp"
#include "common/file_digest.hpp"
#include "common/program_path.hpp"

namespace hvrun {

namespace {

std::string absolute(const std::string& path, const std::string& cwd) {
  if (path.empty() || path[0] == '/' || cwd.empty()) return path;
  return cwd + "/" + path;
}

std::string basename_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Whether every character of `s` is a digit or a dot ("" is).
bool digits_and_dots(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '.' || (c >= '0' && c <= '9'); });
}

// python, python3, python3.11: the names an interpreter is run by.
bool is_python(const std::string& program) {
  const std::string name = basename_of(program);
  return name.starts_with("python") && digits_and_dots(std::string_view(name).substr(6));
}

// "2.18.3" of a file named libnccl.so.2.18.3 (three dot-separated numbers); "" for any other name.
std::string nccl_file_version(std::string_view name) {
  constexpr std::string_view prefix = "libnccl.so.";
  if (!name.starts_with(prefix)) return {};
  const std::string_view version = name.substr(prefix.size());
  int numbers = 0;
  for (std::size_t at = 0; at <= version.size(); ++numbers) {
    const std::size_t dot = std::min(version.find('.', at), version.size());
    if (dot == at || !digits_and_dots(version.substr(at, dot - at))) return {};
    at = dot + 1;
  }
  return numbers == 3 ? std::string(version) : std::string();
}

// The script of `python [options] SCRIPT args`: nothing for -m, -c or a script read from stdin.
std::optional<std::string> python_script(const std::vector<std::string>& argv) {
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-m" || a == "-c" || a == "-" || a.rfind("-m", 0) == 0 || a.rfind("-c", 0) == 0) return std::nullopt;
    if (a == "-W" || a == "-X" || a == "--check-hash-based-pycs") {
      ++i;  // the option's value
      continue;
    }
    if (a == "--") return i + 1 < argv.size() ? std::optional(argv[i + 1]) : std::nullopt;
    if (!a.empty() && a[0] == '-') continue;
    return a;
  }
  return std::nullopt;
}

std::vector<std::string> entries_of(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  ::closedir(d);
  return names;
}

// The digits of the first "#define NAME DIGITS" line in a C header; empty when there is none. A header
// is tens of kilobytes: std::regex over all of it would cost each agent milliseconds.
std::string defined_number(const std::string& text, std::string_view name) {
  const std::string directive = "#define " + std::string(name);
  for (std::size_t at = text.find(directive); at != std::string::npos; at = text.find(directive, at + 1)) {
    if (at != 0 && text[at - 1] != '\n') continue;
    std::size_t i = at + directive.size();
    if (i >= text.size() || (text[i] != ' ' && text[i] != '\t')) continue;
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    const std::size_t digits = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i > digits) return text.substr(digits, i - digits);
  }
  return {};
}

// The run that asks the interpreter for its version and sys.path, in the ranks' environment and working
// directory.
ChildSpec interpreter_query(const std::string& program, const FingerprintRequestMsg& r) {
  std::vector<std::string> env;
  for (const auto& [name, value] : r.env) env.push_back(name + "=" + value);
  return ChildSpec{.argv = {program, "-c", "import sys; print(sys.version.split()[0]); print('\\n'.join(sys.path))"},
                   .program = program,
                   .env = std::move(env),
                   .cwd = r.cwd,
                   .stdio = {ChildStream::dev_null(), ChildStream::pipe("the interpreter's stdout"),
                             ChildStream::dev_null()},
                   .own_group = true,
                   .what = program};
}

// `name`'s version in the first sys.path entry that has its metadata, as import would pick it.
std::string package_version(const std::string& name, const std::vector<std::string>& sys_path) {
  for (const std::string& dir : sys_path) {
    for (const std::string& entry : entries_of(dir)) {
      if (entry.size() <= name.size() + 1 || entry.compare(0, name.size() + 1, name + "-") != 0) continue;
      if (!std::isdigit(static_cast<unsigned char>(entry[name.size() + 1]))) continue;
      const bool dist = entry.ends_with(".dist-info"), egg = entry.ends_with(".egg-info");
      if (!dist && !egg) continue;
      if (std::string v = metadata_version(dir + "/" + entry); !v.empty()) return v;
    }
  }
  return {};
}

std::string nccl_version(const FingerprintRequestMsg& r, const FingerprintRoots& roots) {
  std::vector<std::string> dirs;
  if (const auto it = r.env.find("LD_LIBRARY_PATH"); it != r.env.end()) {
    std::istringstream parts(it->second);
    for (std::string d; std::getline(parts, d, ':');)
      if (!d.empty()) dirs.push_back(d);
  }
  dirs.insert(dirs.end(), roots.library_dirs.begin(), roots.library_dirs.end());
  // The loader opens NCCL by its soname, libnccl.so.2: a directory without it has no NCCL to load, and
  // is not listed (/usr/lib/x86_64-linux-gnu holds thousands of names, every agent would read them).
  // The soname is a link to the versioned file where NCCL's packages install it; a wheel's plain file
  // says nothing, and its directory is listed for a versioned name beside it.
  for (const std::string& dir : dirs) {
    const std::string soname = dir + "/libnccl.so.2";
    struct stat st{};
    if (::lstat(soname.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      const std::string target = std::filesystem::canonical(soname, ec).filename().string();
      if (std::string v = ec ? std::string() : nccl_file_version(target); !v.empty()) return v;
    }
    for (const std::string& entry : entries_of(dir))
      if (std::string v = nccl_file_version(entry); !v.empty()) return v;
  }
  for (const std::string& dir : roots.include_dirs) {
    const std::string header = read_file_head(dir + "/nccl.h", 64u << 10);
    const std::string major = defined_number(header, "NCCL_MAJOR"), minor = defined_number(header, "NCCL_MINOR"),
                      patch = defined_number(header, "NCCL_PATCH");
    if (!major.empty() && !minor.empty() && !patch.empty()) return major + "." + minor + "." + patch;
  }
  return {};
}

constexpr std::size_t kCudaHeaderHead = 64u << 10;

std::string cuda_version(const FingerprintRoots& roots) {
  // version.json (CUDA 11.1 on): {"cuda": {"name": ..., "version": "12.4.1"}, ...}.
  const auto json = nlohmann::json::parse(read_file_head(roots.cuda + "/version.json", 64u << 10), nullptr, false);
  if (json.is_object() && json.contains("cuda") && json["cuda"].is_object() && json["cuda"].contains("version") &&
      json["cuda"]["version"].is_string() && !json["cuda"]["version"].get<std::string>().empty())
    return json["cuda"]["version"].get<std::string>();
  // cuda.h is over 1 MB; CUDA_VERSION is defined in its first few hundred lines (14 KiB in, in CUDA 13):
  // its first 16 KiB are read, and its first 64 KiB only where those do not hold it. A head cut short
  // ends at its last whole line, so a number is never read cut.
  std::string number;
  for (const std::size_t limit : {kCudaHeaderHead / 4, kCudaHeaderHead}) {
    std::string head = read_file_head(roots.cuda + "/include/cuda.h", limit);
    const bool whole = head.size() < limit;
    if (!whole) head.resize(head.rfind('\n') + 1);  // npos + 1 == 0: no whole line
    number = defined_number(head, "CUDA_VERSION");
    if (!number.empty() || whole) break;
  }
  if (!number.empty()) {
    const int v = std::stoi(number);
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  }
  return {};
}

int gpu_count(const FingerprintRoots& roots) {
  struct stat st{};
  if (::stat(roots.nvidia_gpus.c_str(), &st) != 0) return -1;
  return static_cast<int>(entries_of(roots.nvidia_gpus).size());
}

}  // namespace

std::string metadata_version(const std::string& dir) {
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) return {};
  std::string text;
  if (S_ISDIR(st.st_mode)) {
    text = read_file_head(dir + "/METADATA", 64u << 10);
    if (text.empty()) text = read_file_head(dir + "/PKG-INFO", 64u << 10);
  } else {
    text = read_file_head(dir, 64u << 10);
  }
  // The first "Version:" header line's value (RFC 822 style metadata).
  for (std::size_t line = 0; line < text.size();) {
    const std::size_t end = std::min(text.find('\n', line), text.size());
    if (std::string_view(text).substr(line, end - line).starts_with("Version:")) {
      std::size_t from = line + 8;
      while (from < end && (text[from] == ' ' || text[from] == '\t')) ++from;
      const std::size_t to = std::min(text.find('\r', from), end);
      if (to > from) return text.substr(from, to - from);
    }
    line = end + 1;
  }
  return {};
}

FingerprintFiles fingerprint_files(const FingerprintRequestMsg& r, const FingerprintRoots& roots) {
  FingerprintFiles files;
  FingerprintMsg& f = files.msg;
  f.gpus = gpu_count(roots);
  f.nccl = nccl_version(r, roots);
  f.cuda = cuda_version(roots);
  if (r.argv.empty()) return files;
  struct stat cwd{};
  if (!r.cwd.empty() && ::stat(r.cwd.c_str(), &cwd) != 0) {
    f.cwd_error = std::strerror(errno);
    return files;
  }
  if (!r.cwd.empty() && !S_ISDIR(cwd.st_mode)) {
    f.cwd_error = std::strerror(ENOTDIR);
    return files;
  }
  const std::string& first = r.argv.front();
  if (first.find('/') != std::string::npos) {
    const std::string path = absolute(first, r.cwd);
    if (::access(path.c_str(), X_OK) == 0) f.program = path;
  } else {
    const auto it = r.env.find("PATH");
    if (auto found = find_program(first, it == r.env.end() ? std::optional<std::string_view>("/usr/bin:/bin")
                                                            : std::optional<std::string_view>(it->second)))
      f.program = absolute(*found, r.cwd);
  }
  if (f.program.empty()) return files;
  if (!is_python(f.program)) {
    struct stat st{};
    if (::stat(f.program.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<std::uintmax_t>(st.st_size) <= kFingerprintHashLimit) {
      try {
        f.program_sha256 = sha256_file(f.program);
      } catch (const Error&) {
      }
    }
    return files;
  }
  if (const auto script = python_script(r.argv)) {
    f.script = absolute(*script, r.cwd);
    struct stat st{};
    if (::stat(f.script.c_str(), &st) != 0) {
      f.script_error = std::strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
      f.script_error = "not a regular file";
    } else {
      try {
        f.script_sha256 = sha256_file(f.script);
      } catch (const SystemError& e) {
        f.script_error = std::strerror(e.code());
      }
    }
  }
  files.interpreter = interpreter_query(f.program, r);
  return files;
}

void add_interpreter_answer(FingerprintMsg& f, const std::string& out, const std::string& cwd) {
  std::istringstream lines(out);
  std::string version;
  std::getline(lines, version);
  std::vector<std::string> sys_path;
  for (std::string line; std::getline(lines, line);) sys_path.push_back(absolute(line.empty() ? "." : line, cwd));
  f.python = version;
  for (const std::string& name : kFingerprintPackages)
    if (std::string v = package_version(name, sys_path); !v.empty()) f.packages[name] = v;
}

FingerprintMsg take_fingerprint(const FingerprintRequestMsg& r, const FingerprintRoots& roots) {
  FingerprintFiles files = fingerprint_files(r, roots);
  if (!files.interpreter) return files.msg;
  try {
    Child child = Child::start(*files.interpreter);
    const auto out = child.read_outputs(kInterpreterTimeout, kInterpreterOutputLimit);
    if (!out) return files.msg;  // the handle kills and reaps it
    const auto status = child.wait_for(kInterpreterTimeout);
    if (status && status->code == 0) add_interpreter_answer(files.msg, out->out, r.cwd);
  } catch (const Error&) {
  }
  return files.msg;
}

}  // namespace hvrun
