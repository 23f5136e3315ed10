#pragma once
// What tells two agents apart as hosts: the kernel they run on (its boot id) and the network namespace
// they are in. Two agents with the same identity share one network stack, so they are one host to
// the network, whatever names the user gave them; two containers with network namespaces of their
// own on one machine are two.
#include <string>

namespace hvrun {

// "BOOT_ID/net:DEV:INODE" for this process; "" when /proc cannot tell (then it matches nothing).
std::string network_stack_identity();

// The launcher's address as this host saw it and the address this host was reached on, from the
// SSH_CONNECTION sshd sets for the agent's session ("client_ip client_port server_ip server_port");
// left as they are without it (a local agent).
void read_ssh_connection(std::string& client_address, std::string& server_address);

}  // namespace hvrun
