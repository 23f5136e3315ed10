#pragma once
// Reads the rank contract (the environment hvrun gives each rank, see README) into CommunicatorOptions.
// The variables and their meaning are declared once, in rank_contract.cpp's table.
#include <functional>
#include <optional>
#include <string>

#include "hvrun/communicator.hpp"

namespace hvrun {

// `lookup` returns a variable's value or nothing (default: getenv). Throws UsageError naming the first
// missing or malformed variable and what to do about it.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
CommunicatorOptions options_from_rank_contract(const EnvLookup& lookup = {});

}  // namespace hvrun
