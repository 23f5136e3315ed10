#include <catch2/catch.hpp>

#include "launcher/output/line_splitter.hpp"

using hvrun::LineSplitter;

namespace {
std::vector<std::string> split(LineSplitter& s, std::initializer_list<std::string_view> chunks, bool flush) {
  std::vector<std::string> lines;
  auto emit = [&](std::string_view l) { lines.emplace_back(l); };
  for (auto c : chunks) s.feed(c, emit);
  if (flush) s.flush(emit);
  return lines;
}
}  // namespace

TEST_CASE("newline, carriage return and CRLF each end one line", "[output]") {
  LineSplitter s;
  CHECK(split(s, {"a\nb\rc\r\nd\n"}, false) == std::vector<std::string>{"a", "b", "c", "d"});
  CHECK_FALSE(s.has_partial());
}

TEST_CASE("progress bars written with \\r become lines", "[output]") {
  LineSplitter s;
  CHECK(split(s, {"10%\r", "50%\r", "100%\n"}, false) == std::vector<std::string>{"10%", "50%", "100%"});
}

TEST_CASE("a CRLF split across chunks is still one terminator", "[output]") {
  LineSplitter s;
  CHECK(split(s, {"x\r", "\ny\n"}, false) == std::vector<std::string>{"x", "y"});
}

TEST_CASE("empty lines are kept", "[output]") {
  LineSplitter s;
  CHECK(split(s, {"\n\na\n"}, false) == std::vector<std::string>{"", "", "a"});
}

TEST_CASE("partial lines wait for the rest and are flushed at the end", "[output]") {
  LineSplitter s;
  CHECK(split(s, {"hel", "lo wor"}, false).empty());
  CHECK(s.has_partial());
  CHECK(split(s, {"ld"}, true) == std::vector<std::string>{"hello world"});
  CHECK(split(s, {}, true).empty());
}

TEST_CASE("huge lines are cut at the limit, so memory stays bounded", "[output]") {
  LineSplitter s(8);
  const auto lines = split(s, {std::string(20, 'x')}, true);
  CHECK(lines == std::vector<std::string>{"xxxxxxxx", "xxxxxxxx", "xxxx"});
  LineSplitter big;
  const std::string huge(3 * LineSplitter::kDefaultMaxLine + 5, 'y');
  const auto pieces = split(big, {huge}, true);
  REQUIRE(pieces.size() == 4);
  CHECK(pieces[0].size() == LineSplitter::kDefaultMaxLine);
  CHECK(pieces[3].size() == 5);
}

TEST_CASE("binary bytes pass through unchanged", "[output]") {
  LineSplitter s;
  const std::string bin("\0\x01\xff\x7f\x1b[31m", 9);
  const auto lines = split(s, {bin + "\n"}, false);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == bin);
}
