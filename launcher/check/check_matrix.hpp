#pragma once
// `hvrun --check-only --matrix`: who reaches whom, as a host x host table with one character per
// cell (row: the prober, column: the host probed), over each host's chosen NIC (or the best one when
// it has none). A one-way firewall shows as a failing cell whose mirror is ok. Beyond what fits (64
// hosts, or the width), hosts fold into rack-like name groups and a cell shows its worst pair.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/check/check_input.hpp"

namespace hvrun {

// One cell: what host `from` got probing host `to`'s NIC.
struct ReachCell {
  enum class Kind { kSelf, kNoNic, kNotProbed, kProbed };
  Kind kind = Kind::kNoNic;                  // kNoNic: ssh failed on either side, or `to` lacks the NIC
  ProbeOutcome outcome = ProbeOutcome::kOk;  // kProbed only
  const PeerView* view = nullptr;            // kProbed and kNotProbed: the peer's view of the NIC
  const NicVerdict* nic = nullptr;           // `to`'s NIC, when it has it
};

// Which NIC of a host a matrix shows; nullptr when none.
using NicPick = std::function<const NicVerdict*(const HostCheck&)>;

// cells[from][to] over CheckInput::hosts.
std::vector<std::vector<ReachCell>> reach_cells(const CheckInput& in, const NicPick& pick);

// How bad a cell is, for folding a group of pairs into one cell (the worst shows): the diagonal -1,
// ok 0, no NIC 1, not probed 2, a failure 3.
int cell_badness(const ReachCell& cell);

// The cell's character: '.' ok, t r u w a for the failures (outcome_char), '?' not probed, '\\' the
// diagonal, ' ' no NIC.
char cell_char(const ReachCell& cell);

// The matrix over shown_nic() as text of at most `width` columns, with ANSI colours when `colour`,
// then a legend and the one-way pairs.
std::string matrix_text(const CheckInput& in, bool colour, std::size_t width);

}  // namespace hvrun
