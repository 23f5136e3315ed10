#include "common/invariant.hpp"

namespace hvrun {

namespace {
std::string describe(const char* file, int line, const char* condition, const std::string& message) {
  std::string text = "internal error (an hvrun bug) at ";
  text += file;
  text += ":" + std::to_string(line) + ": " + condition;
  if (!message.empty()) text += ": " + message;
  return text;
}
}  // namespace

InternalError::InternalError(const char* file, int line, const char* condition, const std::string& message)
    : Error(describe(file, line, condition, message)), file_(file), line_(line), condition_(condition) {}

namespace detail {
void invariant_failed(const char* file, int line, const char* condition, const std::string& message) {
  throw InternalError(file, line, condition, message);
}
}  // namespace detail

}  // namespace hvrun
