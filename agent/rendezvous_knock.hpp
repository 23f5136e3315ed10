#pragma once
// The agent's side of a knock (KnockMsg, common/horovod_rendezvous.hpp): connect to hvrun's
// rendezvous, send `PUT /hvrun/knock` with the launcher's token, read the answer's status. One deadline
// for all of it, as a probe has.
#include <functional>
#include <memory>

#include "common/control_message.hpp"

namespace boost::asio {
class io_context;
}

namespace hvrun {

class RendezvousKnock {
 public:
  using Done = std::function<void(KnockResultMsg)>;
  // Starts the knock; `done` runs once, on the io thread, with ok only for a 200 answer. Destroying
  // the object abandons the knock: `done` is then not called.
  RendezvousKnock(boost::asio::io_context& io, const KnockMsg& knock, Done done);
  ~RendezvousKnock();
  RendezvousKnock(const RendezvousKnock&) = delete;
  RendezvousKnock& operator=(const RendezvousKnock&) = delete;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hvrun
