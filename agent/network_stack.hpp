#pragma once
// What tells two agents apart as hosts: the kernel they run on (its boot id) and the network namespace
// they are in. Two agents with the same identity share one network stack, so they are one host to
// the network, whatever names the user gave them; two containers with network namespaces of their
// own on one machine are two.
#include <string>

namespace hvrun {

// "BOOT_ID/net:DEV:INODE" for this process; "" when /proc cannot tell (then it matches nothing).
std::string network_stack_identity();

}  // namespace hvrun
