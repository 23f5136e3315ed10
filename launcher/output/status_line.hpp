#pragma once
// One line of progress on a terminal ("connected 5/8, agents up 3/8"), redrawn in place; silent
// when the stream is not a terminal, so logs and pipes never see it.
#include <string>

namespace hvrun {

class StatusLine {
 public:
  explicit StatusLine(int fd);
  ~StatusLine() { clear(); }
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  void show(const std::string& text);
  // Erases the line; call before writing anything else to the terminal.
  void clear();

 private:
  int fd_;
  bool tty_;
  bool shown_ = false;
};

}  // namespace hvrun
