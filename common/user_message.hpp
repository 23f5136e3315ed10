#pragma once
// The one line a user sees for an exception caught at an edge (the programs' main(), the job's and the
// agent's loops). Apart from error.hpp because it logs: the collectives library, which links the wire
// layer and logs only through its own logger, never links this.
#include <exception>
#include <string>

namespace hvrun {

// An Error's own message (it names the host, flag or peer); for any other exception (a library's:
// "[json.exception.type_error.316] ...") "unexpected failure while DOING (an hvrun bug;
// --hvrun-log-level debug shows the details)", the library's text logged at debug level only, by the
// default logger (common/log.hpp). No library's exception text reaches a user otherwise.
std::string user_message(const std::exception& e, const std::string& doing);

}  // namespace hvrun
