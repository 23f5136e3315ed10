#pragma once
// `hvrun --check-only --report FILE.html`: one self-contained page (inline style, no scripts, no
// external assets) to attach to a ticket for a cluster's admins: the summary, then a who-reaches-whom
// matrix over the chosen NICs and one per other NIC name, every cell's verdict in its hover text.
#include <string>

#include "launcher/check/check_input.hpp"

namespace hvrun {

// `summary` is the text summary to show on top (check_summary at 100 columns).
std::string check_html(const CheckInput& in, const std::string& summary);

// Writes `page` to `path` (created or truncated, mode 0644). Throws SystemError naming --report and the
// path when it cannot.
void write_report_file(const std::string& path, const std::string& page);

// `text` with & < > " ' escaped for HTML text and attribute values.
std::string html_escape(const std::string& text);

}  // namespace hvrun
