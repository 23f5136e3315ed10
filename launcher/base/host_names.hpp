#pragma once
// Host names folded for people: "node[01-07,09]" instead of eight names, and rack-like groups of
// names for pictures that cannot show one column per host.
#include <cstddef>
#include <string>
#include <vector>

namespace hvrun {

// `names` as a short list: names that differ only in a trailing number become one "prefix[3-7,9]"
// (numbers keep their zero padding); others are listed as they are. Order: as first seen.
// {"lab1","lab2","lab3","db"} -> "lab[1-3], db"; {"a"} -> "a".
std::string fold_names(const std::vector<std::string>& names);

// Groups of indices into `names`, at most `max_groups` of them, for folding a host x host picture:
// hosts whose names differ only in the last digits of their trailing number form a group ("node0[01-
// 09]" ...), dropping as few digits as gives at most `max_groups`; names without such a number, or
// too many groups still, fall back to consecutive runs of equal size. Groups keep the names' order.
std::vector<std::vector<std::size_t>> name_groups(const std::vector<std::string>& names, std::size_t max_groups);

}  // namespace hvrun
