#include "smart/config/config_reader.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "smart/logging.h"
#include "smart/status.h"

namespace smart {

namespace {

std::string Describe(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text + " (" + value.type_name() + ")";
}

std::vector<std::string> Split(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

thread_local ConfigRecording* tls_recording = nullptr;

std::string FormatDouble(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

}  // namespace

ConfigRecording::ConfigRecording() : previous_(tls_recording) { tls_recording = this; }
ConfigRecording::~ConfigRecording() { tls_recording = previous_; }
ConfigRecording* ConfigRecording::Current() { return tls_recording; }

void ConfigReader::record(const std::string& key, const std::string& type, const std::string& range,
                          const std::string& default_value, bool required) const {
  ConfigRecording* rec = tls_recording;
  if (rec == nullptr) return;
  const size_t slash = source_.rfind('/');
  const std::string file = slash == std::string::npos ? source_ : source_.substr(slash + 1);
  for (const ConfigKeyRecord& k : rec->keys) {
    if (k.file == file && k.key == key) return;  // read twice (a cross-check)
  }
  rec->keys.push_back(ConfigKeyRecord{file, key, type, range, default_value, required});
}

ConfigReader::ConfigReader(const nlohmann::json& root, std::string source)
    : root_(root), source_(std::move(source)) {
  if (!root_.is_object()) {
    throw Error(source_ + ": expected a JSON object at the top level, found " + Describe(root_));
  }
}

void ConfigReader::fail(const std::string& key, const std::string& expectation, const nlohmann::json* found) const {
  std::string message = source_ + ": key \"" + key + "\": expected " + expectation;
  message += found == nullptr ? ", but the key is missing" : ", found " + Describe(*found);
  throw Error(message);
}

void ConfigReader::fail_value(const std::string& key, const std::string& expectation,
                              const std::string& value_text) const {
  if (const nlohmann::json* found = lookup(key)) fail(key, expectation, found);
  throw Error(source_ + ": key \"" + key + "\": expected " + expectation + "; the key is not in the file, and its default (" +
              value_text + ") is not");
}

const nlohmann::json* ConfigReader::lookup(const std::string& key) const {
  const nlohmann::json* node = &root_;
  for (const std::string& part : Split(key)) {
    if (!node->is_object()) return nullptr;
    auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

const nlohmann::json* ConfigReader::get(const std::string& key, bool required, const char* expectation) {
  if (tls_recording != nullptr && expectation[0] != '\0' && std::string(expectation) != "anything") {
    record(key, "JSON", expectation, "", required);
  }
  // Every existing object on the way is known, even if the leaf is absent,
  // so that a misspelt leaf is reported under its own full name.
  {
    std::string prefix;
    const std::vector<std::string> parts = Split(key);
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      prefix += (i ? "." : "") + parts[i];
      const nlohmann::json* parent = lookup(prefix);
      if (parent == nullptr || !parent->is_object()) break;
      used_.insert(prefix);
    }
  }
  const nlohmann::json* value = lookup(key);
  if (value == nullptr) {
    // A parent that exists but is not an object is a type error, not absence.
    const std::vector<std::string> parts = Split(key);
    std::string prefix;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      prefix += (i ? "." : "") + parts[i];
      const nlohmann::json* parent = lookup(prefix);
      if (parent != nullptr && !parent->is_object()) fail(prefix, "an object", parent);
    }
    if (required && tls_recording == nullptr) fail(key, expectation, nullptr);
    return nullptr;
  }
  std::string prefix;
  for (const std::string& part : Split(key)) {
    prefix += (prefix.empty() ? "" : ".") + part;
    used_.insert(prefix);
  }
  return value;
}

void ConfigReader::ignore(const std::string& key) {
  record(key, "ignored", "accepted and not used (upstream's files carry it)", "", false);
  if (get(key, false, "anything") == nullptr) return;
  ignored_.insert(key);
  // Said, so that whoever set it does not believe it took effect.
  if (tls_recording == nullptr) {
    SMART_INFO("%s: key \"%s\" is deprecated (upstream's files carry it; nothing here reads it) and ignored",
               source_.c_str(), key.c_str());
  }
}

void ConfigReader::get_int(const std::string& key, int* out, bool required, long min, long max) {
  const std::string expectation = std::string("an integer in [") + std::to_string(min) + ", " + std::to_string(max) + "]";
  record(key, "integer", std::string("[") + std::to_string(min) + ", " + std::to_string(max) + "]", std::to_string(*out), required);
  const nlohmann::json* v = get(key, required, expectation.c_str());
  if (v == nullptr) return;
  if (!v->is_number_integer()) fail(key, expectation, v);
  const long value = v->get<long>();
  if (value < min || value > max) fail(key, expectation, v);
  *out = static_cast<int>(value);
}

void ConfigReader::get_uint64(const std::string& key, uint64_t* out, bool required, uint64_t min, uint64_t max) {
  const std::string expectation = std::string("an integer in [") + std::to_string(min) + ", " + std::to_string(max) + "]";
  record(key, "integer", std::string("[") + std::to_string(min) + ", " + std::to_string(max) + "]", std::to_string(*out), required);
  const nlohmann::json* v = get(key, required, expectation.c_str());
  if (v == nullptr) return;
  if (!v->is_number_integer() || (v->is_number_integer() && !v->is_number_unsigned() && v->get<long long>() < 0)) {
    fail(key, expectation, v);
  }
  const uint64_t value = v->get<uint64_t>();
  if (value < min || value > max) fail(key, expectation, v);
  *out = value;
}

void ConfigReader::get_double(const std::string& key, double* out, bool required, double min, double max) {
  std::ostringstream os;
  os << "a number in [" << min << ", " << max << "]";
  const std::string expectation = os.str();
  record(key, "number", std::string("[") + FormatDouble(min) + ", " + FormatDouble(max) + "]", FormatDouble(*out),
         required);
  const nlohmann::json* v = get(key, required, expectation.c_str());
  if (v == nullptr) return;
  if (!v->is_number()) fail(key, expectation, v);
  const double value = v->get<double>();
  if (!std::isfinite(value) || value < min || value > max) fail(key, expectation, v);
  *out = value;
}

void ConfigReader::get_bool(const std::string& key, bool* out, bool required) {
  record(key, "boolean", "true, false", *out ? "true" : "false", required);
  const nlohmann::json* v = get(key, required, "true or false");
  if (v == nullptr) return;
  if (!v->is_boolean()) fail(key, "true or false", v);
  *out = v->get<bool>();
}

void ConfigReader::get_string(const std::string& key, std::string* out, bool required) {
  record(key, "string", "", out->empty() ? "" : "\"" + *out + "\"", required);
  const nlohmann::json* v = get(key, required, "a string");
  if (v == nullptr) return;
  if (!v->is_string()) fail(key, "a string", v);
  *out = v->get<std::string>();
}

void ConfigReader::get_choice(const std::string& key, int* out, bool required,
                              const std::vector<std::string>& choices) {
  std::string expectation = "one of";
  for (size_t i = 0; i < choices.size(); ++i) expectation += (i ? ", \"" : " \"") + choices[i] + "\"";
  std::string listed;
  for (size_t i = 0; i < choices.size(); ++i) listed += (i ? ", " : "") + choices[i];
  record(key, "string", "one of " + listed,
         *out >= 0 && static_cast<size_t>(*out) < choices.size() ? "\"" + choices[*out] + "\"" : "", required);
  const nlohmann::json* v = get(key, required, expectation.c_str());
  if (v == nullptr) return;
  if (v->is_string()) {
    for (size_t i = 0; i < choices.size(); ++i) {
      if (v->get<std::string>() == choices[i]) {
        *out = static_cast<int>(i);
        return;
      }
    }
  }
  fail(key, expectation, v);
}

void ConfigReader::check_unknown_in(const nlohmann::json& node, const std::string& prefix) const {
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it.key().empty() && it.key()[0] == '_') continue;
    const std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (used_.count(path) == 0) {
      throw Error(source_ + ": unknown key \"" + path +
                  "\" (misspelt, or not a key of this file; keys starting with '_' are comments)");
    }
    // An object read as a whole (ignore()) has no unread members.
    if (it->is_object() && ignored_.count(path) == 0) check_unknown_in(*it, path);
  }
}

void ConfigReader::check_unknown() const {
  if (tls_recording == nullptr) check_unknown_in(root_, "");
}

nlohmann::json ParseJsonText(const std::string& text, const std::string& source) {
  try {
    return nlohmann::json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number too large for a double.
    throw Error(source + ": not valid JSON: " + e.what());
  }
}

std::string ReadTextFile(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open " + what + " \"" + path + "\"");
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error("cannot read " + what + " \"" + path + "\"");
  return buffer.str();
}

}  // namespace smart
