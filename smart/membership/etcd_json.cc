#include "smart/membership/etcd_json.h"

#include <sodium.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "smart/util/peer_text.h"

namespace smart::etcd::json {

using nlohmann::json;

std::string Base64(const std::string& bytes) {
  const size_t len = sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  std::string out(len, '\0');
  sodium_bin2base64(out.data(), len, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                    sodium_base64_VARIANT_ORIGINAL);
  out.resize(len - 1);  // the terminating NUL
  return out;
}

bool FromBase64(const std::string& text, std::string* bytes) {
  std::string out(text.size() / 4 * 3 + 3, '\0');
  size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(), text.size(),
                        nullptr, &len, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
      end != text.data() + text.size()) {
    return false;
  }
  out.resize(len);
  *bytes = std::move(out);
  return true;
}

namespace {

// The gateway writes 64-bit integers as decimal strings (and small ones at
// times as numbers); both are taken, anything else is refused.
bool ToInt64(const json& v, int64_t* out) {
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return true;
  }
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.empty() || s.size() > 20) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!(s[i] >= '0' && s[i] <= '9') && !(i == 0 && s[i] == '-' && s.size() > 1)) return false;
  }
  errno = 0;
  char* end = nullptr;
  const long long n = strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = n;
  return true;
}

Status Bad(const char* what, const std::string& why, const std::string& text) {
  return Status::Internal(std::string(what) + ": etcd's answer makes no sense: " + why + " (answer: " +
                          PeerText(text) + ")");
}

// An optional integer field: absent is 0 (proto3 leaves zeros out).
bool Int(const json& obj, const char* field, int64_t* out) {
  *out = 0;
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return true;
  return ToInt64(*it, out);
}

bool Bool(const json& obj, const char* field, bool* out) {
  *out = false;
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_boolean()) return false;
  *out = it->get<bool>();
  return true;
}

bool Bytes(const json& obj, const char* field, std::string* out) {
  out->clear();
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  return FromBase64(it->get_ref<const std::string&>(), out);
}

Status Parse(const std::string& text, const char* what, json* out) {
  *out = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return Bad(what, "not JSON", text);
  if (!out->is_object()) return Bad(what, "not a JSON object", text);
  return Status::OK();
}

bool Revision(const json& obj, int64_t* revision) {
  *revision = 0;
  auto it = obj.find("header");
  if (it == obj.end()) return true;
  if (!it->is_object()) return false;
  return Int(*it, "revision", revision) && *revision >= 0;
}

bool ReadKv(const json& v, KeyValue* kv) {
  if (!v.is_object()) return false;
  return Bytes(v, "key", &kv->key) && Bytes(v, "value", &kv->value) &&
         Int(v, "create_revision", &kv->create_revision) && Int(v, "mod_revision", &kv->mod_revision) &&
         Int(v, "version", &kv->version) && Int(v, "lease", &kv->lease) && kv->create_revision >= 0 &&
         kv->mod_revision >= 0 && kv->version >= 0;
}

Status ReadRange(const json& obj, const std::string& text, const char* what, RangeResult* out) {
  out->kvs.clear();
  if (!Revision(obj, &out->revision)) return Bad(what, "header.revision is not a revision", text);
  if (!Bool(obj, "more", &out->more)) return Bad(what, "more is not a boolean", text);
  auto it = obj.find("kvs");
  if (it == obj.end() || it->is_null()) return Status::OK();
  if (!it->is_array()) return Bad(what, "kvs is not a list", text);
  for (const json& v : *it) {
    KeyValue kv;
    if (!ReadKv(v, &kv)) return Bad(what, "a key in kvs is malformed", text);
    out->kvs.push_back(std::move(kv));
  }
  return Status::OK();
}

std::string Str(int64_t n) { return std::to_string(n); }

}  // namespace

std::string RangeRequest(const std::string& key, const std::string& range_end, int64_t limit) {
  json j = {{"key", Base64(key)}};
  if (!range_end.empty()) j["range_end"] = Base64(range_end);
  if (limit > 0) j["limit"] = Str(limit);
  return j.dump();
}

std::string PutRequest(const std::string& key, const std::string& value, int64_t lease) {
  json j = {{"key", Base64(key)}, {"value", Base64(value)}};
  if (lease != 0) j["lease"] = Str(lease);
  return j.dump();
}

std::string PutIfRequest(const std::string& key, int64_t expected_mod_revision, const std::string& value,
                         int64_t lease) {
  json put = {{"key", Base64(key)}, {"value", Base64(value)}};
  if (lease != 0) put["lease"] = Str(lease);
  // Absent is "created at revision 0"; present is "last changed at N".
  json compare = expected_mod_revision == 0
                     ? json{{"target", "CREATE"}, {"result", "EQUAL"}, {"key", Base64(key)}, {"create_revision", "0"}}
                     : json{{"target", "MOD"},
                            {"result", "EQUAL"},
                            {"key", Base64(key)},
                            {"mod_revision", Str(expected_mod_revision)}};
  json j = {{"compare", json::array({compare})},
            {"success", json::array({json{{"request_put", put}}})},
            {"failure", json::array({json{{"request_range", json{{"key", Base64(key)}}}}})}};
  return j.dump();
}

std::string DeleteRequest(const std::string& key, const std::string& range_end) {
  json j = {{"key", Base64(key)}};
  if (!range_end.empty()) j["range_end"] = Base64(range_end);
  return j.dump();
}

std::string LeaseGrantRequest(int64_t ttl_s) { return json{{"TTL", Str(ttl_s)}}.dump(); }

std::string LeaseIdRequest(int64_t lease) { return json{{"ID", Str(lease)}}.dump(); }

std::string WatchRequest(const std::string& key, const std::string& range_end, int64_t start_revision) {
  json create = {{"key", Base64(key)}};
  if (!range_end.empty()) create["range_end"] = Base64(range_end);
  if (start_revision > 0) create["start_revision"] = Str(start_revision);
  return json{{"create_request", create}}.dump();
}

Status ParseRange(const std::string& text, const char* what, RangeResult* out) {
  json obj;
  Status s = Parse(text, what, &obj);
  if (!s.ok()) return s;
  return ReadRange(obj, text, what, out);
}

Status ParseHeaderRevision(const std::string& text, const char* what, int64_t* revision) {
  json obj;
  Status s = Parse(text, what, &obj);
  if (!s.ok()) return s;
  if (!Revision(obj, revision)) return Bad(what, "header.revision is not a revision", text);
  if (*revision <= 0) return Bad(what, "no header.revision", text);
  return Status::OK();
}

Status ParseDelete(const std::string& text, const char* what, int64_t* deleted) {
  json obj;
  Status s = Parse(text, what, &obj);
  if (!s.ok()) return s;
  if (!Int(obj, "deleted", deleted) || *deleted < 0) return Bad(what, "deleted is not a count", text);
  return Status::OK();
}

Status ParseTxn(const std::string& text, const char* what, TxnResult* out) {
  *out = TxnResult();
  json obj;
  Status s = Parse(text, what, &obj);
  if (!s.ok()) return s;
  if (!Revision(obj, &out->revision) || out->revision <= 0) return Bad(what, "no header.revision", text);
  if (!Bool(obj, "succeeded", &out->succeeded)) return Bad(what, "succeeded is not a boolean", text);
  auto it = obj.find("responses");
  const bool has = it != obj.end() && !it->is_null();
  if (has && (!it->is_array() || it->size() > 1)) return Bad(what, "responses is not a list of one", text);
  if (out->succeeded) {
    if (!has || it->empty() || !(*it)[0].is_object() || !(*it)[0].contains("response_put"))
      return Bad(what, "a successful transaction without its put's response", text);
    return Status::OK();
  }
  // Failed comparison: the failure branch read the key.
  if (!has || it->empty() || !(*it)[0].is_object()) return Bad(what, "a failed transaction without its read", text);
  auto r = (*it)[0].find("response_range");
  if (r == (*it)[0].end() || !r->is_object()) return Bad(what, "a failed transaction without its read", text);
  RangeResult range;
  s = ReadRange(*r, text, what, &range);
  if (!s.ok()) return s;
  if (range.kvs.size() > 1) return Bad(what, "the read of one key returned several", text);
  if (!range.kvs.empty()) out->current = std::move(range.kvs[0]);
  return Status::OK();
}

Status ParseLeaseGrant(const std::string& text, const char* what, Lease* out) {
  json obj;
  Status s = Parse(text, what, &obj);
  if (!s.ok()) return s;
  auto err = obj.find("error");
  if (err != obj.end() && err->is_string() && !err->get_ref<const std::string&>().empty())
    return Status::PeerFailed(std::string(what) + ": etcd refused: " + PeerText(err->get<std::string>()));
  if (!Int(obj, "ID", &out->id) || out->id <= 0) return Bad(what, "ID is not a lease", text);
  if (!Int(obj, "TTL", &out->ttl_s) || out->ttl_s <= 0) return Bad(what, "TTL is not a positive count", text);
  return Status::OK();
}

namespace {

// A streamed call's answer comes wrapped in "result", or is an "error".
// *result points into *obj; with `bare_ok` an answer without the wrapper
// is taken as the result itself.
Status Streamed(const std::string& text, const char* what, bool bare_ok, json* obj, const json** result) {
  Status s = Parse(text, what, obj);
  if (!s.ok()) return s;
  auto err = obj->find("error");
  if (err != obj->end() && !err->is_null()) {
    // Only its message and code are read: the rest (of any depth) is not
    // printed.
    json small = json::object();
    for (const char* field : {"message", "error"}) {
      if (err->is_object() && err->contains(field) && (*err)[field].is_string()) {
        small["message"] = (*err)[field];
        break;
      }
    }
    if (err->is_string()) small["message"] = *err;
    if (err->is_object() && err->contains("code") && (*err)["code"].is_number_integer()) small["code"] = (*err)["code"];
    return ErrorStatus(200, small.dump(), what, false);
  }
  auto it = obj->find("result");
  if (it == obj->end() && bare_ok) {
    *result = obj;
    return Status::OK();
  }
  if (it == obj->end() || !it->is_object()) return Bad(what, "no result object", text);
  *result = &*it;
  return Status::OK();
}

}  // namespace

Status ParseKeepAlive(const std::string& text, const char* what, int64_t* ttl_s) {
  json obj;
  const json* r = nullptr;
  Status s = Streamed(text, what, /*bare_ok=*/true, &obj, &r);
  if (!s.ok()) return s;
  if (!Int(*r, "TTL", ttl_s) || *ttl_s < 0) return Bad(what, "TTL is not a count", text);
  return Status::OK();
}

Status ParseWatchMessage(const std::string& text, WatchBatch* out) {
  static const char* what = "etcd watch";
  *out = WatchBatch();
  json obj;
  const json* result = nullptr;
  Status s = Streamed(text, what, /*bare_ok=*/false, &obj, &result);
  if (!s.ok()) return s;
  const json& r = *result;
  if (!Revision(r, &out->revision)) return Bad(what, "header.revision is not a revision", text);
  if (!Bool(r, "created", &out->created) || !Bool(r, "canceled", &out->canceled))
    return Bad(what, "created or canceled is not a boolean", text);
  if (!Int(r, "compact_revision", &out->compact_revision) || out->compact_revision < 0)
    return Bad(what, "compact_revision is not a revision", text);
  auto reason = r.find("cancel_reason");
  if (reason != r.end() && !reason->is_null()) {
    if (!reason->is_string()) return Bad(what, "cancel_reason is not text", text);
    out->cancel_reason = reason->get<std::string>();
  }
  auto events = r.find("events");
  if (events == r.end() || events->is_null()) return Status::OK();
  if (!events->is_array()) return Bad(what, "events is not a list", text);
  for (const json& e : *events) {
    if (!e.is_object()) return Bad(what, "an event is not an object", text);
    WatchEvent ev;
    auto type = e.find("type");
    if (type != e.end() && !type->is_null()) {
      if (*type == "DELETE" || *type == 1) {
        ev.type = WatchEvent::Type::kDelete;
      } else if (!(*type == "PUT" || *type == 0)) {
        return Bad(what, "an event of unknown type", text);
      }
    }
    auto kv = e.find("kv");
    if (kv == e.end() || !ReadKv(*kv, &ev.kv)) return Bad(what, "an event's kv is malformed", text);
    out->events.push_back(std::move(ev));
  }
  return Status::OK();
}

Status ErrorStatus(long http_status, const std::string& body, const char* what, bool mutating) {
  std::string message;
  int64_t code = -1;
  json obj = json::parse(body, nullptr, false);
  if (!obj.is_discarded() && obj.is_object()) {
    for (const char* field : {"message", "error"}) {
      auto it = obj.find(field);
      if (it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
        message = it->get<std::string>();
        break;
      }
    }
    auto c = obj.find("code");
    if (c != obj.end()) ToInt64(*c, &code);
  }
  if (message.empty()) message = body.empty() ? "(no text)" : body;
  std::string text = std::string(what) + ": etcd answered HTTP " + std::to_string(http_status);
  if (code >= 0) text += ", code " + std::to_string(code);
  text += ": " + PeerText(message);
  // A refusal is definite only for what etcd checks before it applies a
  // change: gRPC's invalid argument (3), not found (5), already exists (6),
  // permission denied (7), failed precondition (9), out of range (11) and
  // unauthenticated (16), or the gateway's 400 and 404. Anything else
  // (timeouts, unavailable, canceled, a proxy's 502) may have taken effect.
  const bool definite = code == 3 || code == 5 || code == 6 || code == 7 || code == 9 || code == 11 ||
                        code == 16 || ((http_status == 400 || http_status == 404) && code < 0);
  if (!definite) {
    return mutating ? Status::OutcomeUnknown(text + " (it may have taken effect)") : Status::PeerFailed(text);
  }
  if (code == 3) return Status::InvalidArgument(text);
  if (code == 5 || message.find("not found") != std::string::npos) return Status::NotFound(text);
  return Status::PeerFailed(text);
}

Status WatchStreamSplitter::Feed(const char* data, size_t len,
                                 const std::function<Status(const std::string&)>& on_message) {
  size_t start = 0;
  for (size_t i = 0; i < len; ++i) {
    if (data[i] != '\n') continue;
    if (partial_.size() + (i - start) > kMaxWatchMessage) break;
    partial_.append(data + start, i - start);
    start = i + 1;
    std::string message;
    message.swap(partial_);
    if (message.find_first_not_of(" \r\t") == std::string::npos) continue;
    Status s = on_message(message);
    if (!s.ok()) return s;
  }
  if (partial_.size() + (len - start) > kMaxWatchMessage) {
    return Status::Internal("etcd watch: a message longer than " + std::to_string(kMaxWatchMessage) +
                            " bytes; refused rather than cut");
  }
  partial_.append(data + start, len - start);
  return Status::OK();
}

}  // namespace smart::etcd::json
