// Memory blade addresses as every server list and --server flag takes them
// (ParseServerAddress), and the lists of the bench configs.
#include "smart/config/server_list.h"

#include "smart/resource/auth.h"

#include <cstdlib>
#include <string>

#include "smart/common.h"
#include "smart/config.h"
#include "smart/status.h"

namespace smart {

ServerAddress ParseServerAddress(const std::string& text, int default_port) {
  const auto bad = [&](const std::string& why) {
    return Error("memory blade address \"" + text + "\": " + why +
                 " (expected host, host:port or [IPv6 address]:port)");
  };
  std::string host = text;
  std::string port_text;
  bool has_port = false;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) throw bad("no closing ]");
    host = text.substr(1, close - 1);
    const std::string rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') throw bad("expected : after ]");
      port_text = rest.substr(1);
      has_port = true;
    }
  } else if (const size_t colon = text.find(':'); colon != std::string::npos) {
    if (text.find(':', colon + 1) != std::string::npos) throw bad("an IPv6 address needs brackets");
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    has_port = true;
  }
  if (host.empty()) throw bad("no host");
  ServerAddress address{host, default_port};
  if (!has_port) {
    if (default_port < 0) throw bad("no port");
    return address;
  }
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos || std::stoi(port_text) < 1 ||
      std::stoi(port_text) > 65535) {
    throw bad("port \"" + port_text + "\" is not within 1..65535");
  }
  address.port = std::stoi(port_text);
  return address;
}

// One entry of a server list: an address string, or {"hostname": ..., "port": ...}
// (the port optional where `default_port` is not negative).
ServerAddress ReadServerEntry(ConfigReader& r, const char* key, const char* expectation, const nlohmann::json& s,
                              int default_port) {
  if (s.is_string()) {
    try {
      return ParseServerAddress(s.get<std::string>(), default_port);
    } catch (const Error& e) {
      r.fail(key, std::string(expectation) + "; " + e.what(), &s);
    }
  }
  const bool port_optional = default_port >= 0;
  const size_t known = 1 + (s.is_object() && s.contains("port") ? 1 : 0) + (s.is_object() && s.contains("pool_id") ? 1 : 0);
  if (!s.is_object() || !s.contains("hostname") || s.size() != known ||
      (!port_optional && !s.contains("port")) || !s["hostname"].is_string() ||
      s["hostname"].get<std::string>().empty() ||
      (s.contains("port") && (!s["port"].is_number_integer() || s["port"].get<long>() < 1 ||
                              s["port"].get<long>() > 65535))) {
    r.fail(key, expectation, &s);
  }
  ServerAddress address{s["hostname"].get<std::string>(),
                        s.contains("port") ? static_cast<int>(s["port"].get<long>()) : default_port};
  if (s.contains("pool_id")) {
    // The blade's pool, pinned: its ID as the blade prints it at start.
    if (!s["pool_id"].is_string() || !ParsePoolId(s["pool_id"].get<std::string>(), &address.pool_id)) {
      r.fail(key, "\"pool_id\": 16 lowercase hex digits, as the memory blade prints its pool ID", &s);
    }
  }
  return address;
}

// memory_servers: [{"hostname": ..., "port": ...} or "host:port", ...].
void ReadMemoryServers(ConfigReader& r, bool required, std::vector<ServerAddress>* out) {
  const char* expectation = "an array of memory blade addresses: \"host:port\" or "
                            "{\"hostname\": string, \"port\": integer, \"pool_id\": 16 hex digits (optional)}";
  const nlohmann::json* servers = r.get("memory_servers", required, expectation);
  if (servers == nullptr) return;
  if (!servers->is_array()) r.fail("memory_servers", expectation, servers);
  for (const nlohmann::json& s : *servers) out->push_back(ReadServerEntry(r, "memory_servers", expectation, s, -1));
  if (out->size() > static_cast<size_t>(kMaxNodes)) {
    r.fail("memory_servers", "at most " + std::to_string(kMaxNodes) + " servers", servers);
  }
}

// MEMORY_NODES=k: use only the first k memory servers.
void ApplyMemoryNodes(std::vector<ServerAddress>* servers) {
  std::string value;
  if (!GetEnv("MEMORY_NODES", &value)) return;
  char* end = nullptr;
  const long k = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || k < 1) {
    throw Error("MEMORY_NODES: expected a positive integer, found \"" + value + "\"");
  }
  if (static_cast<size_t>(k) < servers->size()) servers->resize(static_cast<size_t>(k));
}

}  // namespace smart
