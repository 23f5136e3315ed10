#pragma once
// One rank's stdout and stderr pipes as the agent reads them (agent.cpp), with the filter that names
// the frames of the crash reports on its stderr before they go to the launcher (CrashTextFilter).
#include <memory>
#include <string>
#include <string_view>
#include <utility>  // before Asio: docs/DESIGN.md §8
#include <boost/asio/posix/stream_descriptor.hpp>

#include "agent/crash_text_filter.hpp"
#include "common/control_message.hpp"

namespace hvrun {

class RankPipes {
 public:
  using Descriptor = boost::asio::posix::stream_descriptor;

  // Takes the pipes' read ends.
  RankPipes(boost::asio::io_context& io, int out, int err);

  // The stream's descriptor while it is open; null once closed.
  Descriptor* open(OutputStream stream);
  // What goes on to the launcher for `bytes` read from `stream` (valid until the next call).
  std::string_view pass(OutputStream stream, std::string_view bytes);
  // Closes `stream`; returns what its filter held, to go on.
  std::string close(OutputStream stream);

 private:
  std::unique_ptr<Descriptor> out_, err_;
  CrashTextFilter err_text_;
  std::string passed_;
};

}  // namespace hvrun
