// smart_keygen: writes a new shared key for authenticated sessions.
//
//   smart_keygen [PATH]    (default: smart.key)
//
// The file gets a new key of 32 random bytes and its ID, in the format of
// smart/resource/auth.h, with mode 0600; an existing file is never replaced.
// Copy it to every memory blade and client of the cluster (each user its own
// copy, mode 0600) and name it in "auth": {"key_file": PATH} of backend.json
// and smart_config.json.
#include <CLI/CLI.hpp>
#include <stdlib.h>

#include <cstdio>
#include <string>

#include "smart/command_line.h"
#include "smart/resource/auth.h"

int main(int argc, char** argv) {
  CLI::App app{"smart_keygen: write a new shared key (32 random bytes and its ID, mode 0600) for authenticated "
               "sessions"};
  std::string path = "smart.key";
  app.add_option("PATH", path, "file to create (default: smart.key); never replaced if it exists");
  SMART_PARSE_COMMAND_LINE(app, argc, argv);
  std::string id;
  try {
    id = smart::WriteNewKeyFile(path);
  } catch (const std::exception& e) {
    fprintf(stderr, "smart_keygen: %s\n", e.what());
    return 1;
  }
  // The config wants the path from the config file's folder, not from
  // here: name the file by its absolute path, and by its name alone for a
  // config beside it.
  char* absolute = realpath(path.c_str(), nullptr);
  const std::string full = absolute != nullptr ? absolute : path;
  free(absolute);
  const size_t slash = full.rfind('/');
  const std::string name = slash == std::string::npos ? full : full.substr(slash + 1);
  printf("smart_keygen: wrote key %s to %s (mode 0600); copy it to every memory blade and client and set "
         "\"auth\": {\"key_file\": \"%s\"} (a relative key_file is read from the config file's folder: "
         "\"%s\" for a config file beside it)\n",
         id.c_str(), path.c_str(), full.c_str(), name.c_str());
  return 0;
}
