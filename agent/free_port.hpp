#pragma once
// The port the agent offers as MASTER_PORT (HelloMsg, RestartReadyMsg).

namespace hvrun {

// A port that is free right now on every address of this host; the rank that binds it later races
// with other programs exactly as torchrun's choice does.
int pick_free_port();

}  // namespace hvrun
