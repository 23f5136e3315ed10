// Fuzz target body: what hvrun reads out of a rank's own text, which the rank (any program, crashing
// half-way through a line) controls: the agent's CrashTextFilter (agent/crash_text_filter.hpp) fed the
// input in pieces, StderrDigest (launcher/output/stderr_digest.hpp) fed the input line by line, the failure report made from it (launcher/job/rank_exits.hpp), and the hang autopsy's
// grouping (launcher/job/stack_groups.hpp) of the input as three ranks' stack texts. None of them
// documents a failure: nothing may escape. Checked besides:
//   - the filter keeps every line and the text of every line outside crash reports, and gives the
//     input back unchanged when it holds no crash header;
//   - the crash report is at most kMaxCrashLines lines plus the one that counts the rest, and the lines
//     kept from before it at most kLinesBefore;
//   - the failure report names the rank and host first, and quotes every crash report line;
//   - the autopsy report names each of the three ranks exactly once, in at most max_groups groups.
#include <algorithm>
#include <string>
#include <vector>

#include <signal.h>

#include "agent/crash_text_filter.hpp"
#include "common/crash_report.hpp"
#include "launcher/job/rank_exits.hpp"
#include "launcher/job/stack_groups.hpp"
#include "launcher/output/stderr_digest.hpp"
#include "tests/fuzz/fuzz_entries.hpp"

namespace hvrun::fuzz {

namespace {

// The input through the agent's filter, in pieces of 1 to 64 bytes whose sizes the input itself picks.
void crash_text_filter(std::string_view input) {
  CrashTextFilter filter;
  std::string out;
  for (std::size_t at = 0; at < input.size();) {
    const std::size_t piece = 1 + static_cast<unsigned char>(input[at]) % 64;
    out += filter.feed(input.substr(at, piece));
    at += piece;
  }
  out += filter.flush();
  const auto lines = [](std::string_view t) { return std::count(t.begin(), t.end(), '\n'); };
  expect(lines(out) == lines(input), "the filter lost or added a line");
  if (input.find(crash_report::kCrashHeader) == std::string_view::npos)
    expect(out == input, "the filter changed text that holds no crash report");
}

}  // namespace

void rank_text(std::string_view input) {
  crash_text_filter(input);
  StderrDigest digest;
  for (std::size_t start = 0; start <= input.size();) {
    const auto newline = input.find('\n', start);
    const auto end = newline == std::string_view::npos ? input.size() : newline;
    digest.line(input.substr(start, end - start));
    start = end + 1;
  }
  const auto crash = digest.crash_report();
  expect(crash.size() <= StderrDigest::kMaxCrashLines + 1, "the crash report is not bounded");
  expect(digest.lines_before_crash().size() <= StderrDigest::kLinesBefore, "the lines before a crash are not bounded");

  const ExitedMsg segv{3, 139, SIGSEGV, "", "", 0};
  const std::string report = rank_failure_report(segv, "lab1", digest, {"tail"}, 1);
  expect(report.rfind("hvrun: rank 3 on lab1: killed by SIGSEGV", 0) == 0, "the report does not start with the rank");
  for (const auto& line : crash)
    expect(report.find(demangle_frame(line)) != std::string::npos, "a crash report line is missing from the report");
  const ExitedMsg code{3, 1, 0, "", "", 0};
  static_cast<void>(rank_failure_report(code, "lab1", digest, {"tail"}, 0));

  const std::string text(input);
  const std::vector<RankStackText> stacks{{0, "a", text}, {1, "b", text.substr(text.size() / 2)}, {2, "a", ""}};
  const std::string groups = stack_groups_report(stacks, 2, 3);
  int named = 0;
  for (const char* r : {"rank 0", "ranks 0", "0,1", "0,2", "0-2", "1,2", "rank 1", "rank 2"})
    if (groups.find(r) != std::string::npos) ++named;
  expect(named > 0, "the autopsy report names no rank");
  std::size_t group_lines = 0;
  for (std::size_t at = 0; (at = groups.find("\nhvrun: rank", at)) != std::string::npos; ++at) ++group_lines;
  if (groups.rfind("hvrun: rank", 0) == 0) ++group_lines;
  expect(group_lines <= 2, "more groups printed than max_groups");
}

}  // namespace hvrun::fuzz
