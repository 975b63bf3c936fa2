// Typed, validating access to a JSON config: every accessor names the file and
// the dotted key in its error, and check_unknown() rejects keys nobody read.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace smart {

// One key as a parser reads it: what the generated configuration reference
// (docs/config_reference.md, tools/config_reference) lists, so that the
// reference comes from the parser itself and cannot drift from it.
struct ConfigKeyRecord {
  std::string file;           // e.g. smart_config.json (the source's file name)
  std::string key;            // dotted
  std::string type;           // integer, number, boolean, string, one of, ...
  std::string range;          // [min, max], the choices, or what is expected
  std::string default_value;  // the value before the file is read
  bool required = false;
};

// While one exists on the calling thread, every ConfigReader records the keys
// it reads (with the value its struct held before, its default), a missing
// required key is not an error, unknown keys are not checked, and GetEnv
// records the variables asked for. For the reference generator only.
class ConfigRecording {
 public:
  ConfigRecording();
  ~ConfigRecording();
  ConfigRecording(const ConfigRecording&) = delete;
  ConfigRecording& operator=(const ConfigRecording&) = delete;
  // The recording of the calling thread, or nullptr.
  static ConfigRecording* Current();

  std::vector<ConfigKeyRecord> keys;
  std::vector<std::string> environment;  // variable names, in the order asked

 private:
  ConfigRecording* previous_;
};

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& root, std::string source);

  // Missing required keys are errors; missing optional keys leave *out as is.
  void get_int(const std::string& key, int* out, bool required, long min, long max);
  void get_uint64(const std::string& key, uint64_t* out, bool required, uint64_t min, uint64_t max);
  void get_double(const std::string& key, double* out, bool required, double min, double max);
  void get_bool(const std::string& key, bool* out, bool required);
  void get_string(const std::string& key, std::string* out, bool required);
  // A string that must be one of `choices`; returns its index via *out.
  void get_choice(const std::string& key, int* out, bool required, const std::vector<std::string>& choices);
  // The value at `key` (nullptr when absent and optional); marks it read.
  const nlohmann::json* get(const std::string& key, bool required, const char* expectation);
  // Keys that are accepted and ignored (upstream reads but never uses them).
  void ignore(const std::string& key);
  // Throws for the first key that no accessor read. Keys starting with '_'
  // are comments.
  void check_unknown() const;

  [[noreturn]] void fail(const std::string& key, const std::string& expectation, const nlohmann::json* found) const;
  // fail() for a key whose value, read or left at its default
  // (`value_text`), conflicts with another key's: names what the file holds,
  // or says that the default is what conflicts.
  [[noreturn]] void fail_value(const std::string& key, const std::string& expectation,
                               const std::string& value_text) const;

 private:
  const nlohmann::json* lookup(const std::string& key) const;
  void record(const std::string& key, const std::string& type, const std::string& range,
              const std::string& default_value, bool required) const;
  void check_unknown_in(const nlohmann::json& node, const std::string& prefix) const;

  const nlohmann::json& root_;
  std::string source_;
  std::set<std::string> used_;
  std::set<std::string> ignored_;
};

nlohmann::json ParseJsonText(const std::string& text, const std::string& source);
std::string ReadTextFile(const std::string& path, const std::string& what);

}  // namespace smart
