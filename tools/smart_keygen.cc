// smart_keygen: writes a new shared key for authenticated sessions.
//
//   smart_keygen [PATH]    (default: smart.key)
//
// The file gets 32 random bytes and mode 0600; an existing file is never
// replaced. Copy it to every memory blade and client of the cluster and name
// it in "auth": {"key_file": PATH} of backend.json and smart_config.json.
// The same as: (umask 077; head -c 32 /dev/urandom > smart.key)
#include <CLI/CLI.hpp>
#include <cstdio>

#include "smart/command_line.h"
#include "smart/resource/auth.h"

int main(int argc, char** argv) {
  CLI::App app{"smart_keygen: write a new shared key (32 random bytes, mode 0600) for authenticated sessions"};
  std::string path = "smart.key";
  app.add_option("PATH", path, "file to create (default: smart.key); never replaced if it exists");
  SMART_PARSE_COMMAND_LINE(app, argc, argv);
  try {
    smart::WriteNewKeyFile(path);
  } catch (const std::exception& e) {
    fprintf(stderr, "smart_keygen: %s\n", e.what());
    return 1;
  }
  printf("smart_keygen: wrote a new key to %s (mode 0600); copy it to every memory blade and client and set "
         "\"auth\": {\"key_file\": \"%s\"}\n",
         path.c_str(), path.c_str());
  return 0;
}
