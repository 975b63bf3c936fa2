// Reading lists of memory blade addresses from a config file (internal to
// the config parsers). ParseServerAddress, the form of one address, is
// public (smart/config.h).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "smart/config.h"
#include "smart/config/config_reader.h"

namespace smart {

// One entry of a server list: an address string, or {"hostname": ...,
// "port": ...} (the port optional where `default_port` is not negative).
// Fails through `r`, naming `key` and `expectation`.
ServerAddress ReadServerEntry(ConfigReader& r, const char* key, const char* expectation, const nlohmann::json& s,
                              int default_port);

// memory_servers: [{"hostname": ..., "port": ...} or "host:port", ...];
// at most kMaxNodes.
void ReadMemoryServers(ConfigReader& r, bool required, std::vector<ServerAddress>* out);

// MEMORY_NODES=k: use only the first k memory servers.
void ApplyMemoryNodes(std::vector<ServerAddress>* servers);

}  // namespace smart
