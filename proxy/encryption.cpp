// keymaster and encryption (encryption.h): the stored format first, then the two middlewares.
#include "proxy/encryption.h"

#include <algorithm>
#include <cctype>
#include <span>
#include <map>
#include <vector>

#include <boost/json.hpp>

#include "common/constraints.h"
#include "common/crypto/aes_ctr.h"
#include "common/crypto/base64.h"
#include "common/crypto/hmac.h"
#include "common/crypto/md5.h"
#include "common/crypto/random.h"
#include "common/http/headers.h"
#include "common/http/mime.h"
#include "common/http/range.h"
#include "common/http/swob.h"
#include "common/http/url.h"
#include "common/listing_format.h"
#include "common/log/log.h"
#include "proxy/backend.h"
#include "proxy/limits.h"

namespace apus::proxy {

namespace net = boost::asio;
namespace json = boost::json;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;

namespace {

// Python's str.strip().
std::string_view strip_ws(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string random_string(size_t n) {
  std::string out(n, '\0');
  common::crypto::random_bytes(std::span(reinterpret_cast<uint8_t*>(out.data()), n));
  return out;
}

}  // namespace

namespace encryption {

namespace {

// Python's json.dumps(value, sort_keys=True): members sorted by name at every level.
void append_sorted_json(std::string& out, const json::value& v) {
  if (!v.is_object()) {
    common::listing::append_python_json(out, v);
    return;
  }
  const json::object& o = v.get_object();
  std::vector<const json::key_value_pair*> members;
  for (const auto& m : o) members.push_back(&m);
  std::sort(members.begin(), members.end(),
            [](auto* a, auto* b) { return a->key() < b->key(); });
  out += "{";
  for (size_t i = 0; i < members.size(); ++i) {
    if (i) out += ", ";
    common::listing::append_json_string(out, members[i]->key());
    out += ": ";
    append_sorted_json(out, members[i]->value());
  }
  out += "}";
}

// Python's urllib.parse.quote_plus().
std::string quote_plus(std::string_view s) {
  std::string quoted = common::http::quote(s, " ");
  std::replace(quoted.begin(), quoted.end(), ' ', '+');
  return quoted;
}

std::string unquote_plus(std::string_view s) {
  std::string spaced(s);
  std::replace(spaced.begin(), spaced.end(), '+', ' ');
  return common::http::percent_decode(spaced);
}

std::optional<std::string> b64_field(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(name);
  if (!v || !v->is_string()) return std::nullopt;
  return common::crypto::strict_b64decode(std::string_view(v->get_string()));
}

}  // namespace

std::string dump_crypto_meta(const CryptoMeta& meta) {
  json::object o;
  if (meta.body_key) {
    o["body_key"] = json::object{{"iv", common::crypto::b64encode(meta.body_key->iv)},
                                 {"key", common::crypto::b64encode(meta.body_key->key)}};
  }
  o["cipher"] = meta.cipher;
  if (!meta.iv.empty()) o["iv"] = common::crypto::b64encode(meta.iv);
  if (!meta.key_id.empty()) {
    boost::system::error_code ec;
    json::value id = json::parse(meta.key_id, ec);
    if (!ec) o["key_id"] = std::move(id);
  }
  std::string text;
  append_sorted_json(text, o);
  return quote_plus(text);
}

Result<CryptoMeta> load_crypto_meta(std::string_view value) {
  boost::system::error_code ec;
  json::value v = json::parse(unquote_plus(value), ec);
  if (ec || !v.is_object()) return Status::invalid_argument("Bad crypto meta: not a JSON object");
  const json::object& o = v.get_object();
  CryptoMeta meta;
  meta.cipher.clear();
  if (const json::value* c = o.if_contains("cipher"); c && c->is_string()) {
    meta.cipher = std::string(c->get_string());
  }
  if (o.contains("iv")) {
    auto iv = b64_field(o, "iv");
    if (!iv) return Status::invalid_argument("Bad crypto meta: iv is not base64");
    meta.iv = std::move(*iv);
  }
  if (const json::value* bk = o.if_contains("body_key")) {
    if (!bk->is_object()) return Status::invalid_argument("Bad crypto meta: body_key");
    auto key = b64_field(bk->get_object(), "key");
    auto iv = b64_field(bk->get_object(), "iv");
    if (!key || !iv) return Status::invalid_argument("Bad crypto meta: body_key");
    meta.body_key = WrappedKey{std::move(*key), std::move(*iv)};
  }
  if (const json::value* id = o.if_contains("key_id")) {
    if (!id->is_object()) return Status::invalid_argument("Bad crypto meta: key_id");
    append_sorted_json(meta.key_id, *id);
  }
  return meta;
}

Status check_crypto_meta(const CryptoMeta& meta) {
  if (meta.cipher != kCipher) {
    return Status::invalid_argument("Bad crypto meta: Cipher must be " + std::string(kCipher));
  }
  if (meta.iv.size() != common::crypto::kAesIvBytes) {
    return Status::invalid_argument("Bad crypto meta: IV must be length 16 bytes");
  }
  return Status();
}

Result<ValueWithMeta> extract_crypto_meta(std::string_view value) {
  // As cgi.parse_header() splits it: the value before the first ';', then name=value params.
  // Base64 and quote_plus() output hold neither ';' nor quotes.
  ValueWithMeta out;
  size_t semi = value.find(';');
  out.value = std::string(strip_ws(value.substr(0, semi)));
  while (semi != std::string_view::npos) {
    size_t next = value.find(';', semi + 1);
    std::string_view param = strip_ws(value.substr(semi + 1, next - semi - 1));
    semi = next;
    size_t eq = param.find('=');
    if (eq == std::string_view::npos) continue;
    std::string name(strip_ws(param.substr(0, eq)));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (name != "swift_meta") continue;
    auto meta = load_crypto_meta(strip_ws(param.substr(eq + 1)));
    if (!meta.ok()) return meta.status();
    out.meta = std::move(*meta);
  }
  return out;
}

std::string encrypt_value(std::string_view key, std::string_view value, std::string_view key_id) {
  CryptoMeta meta;
  meta.iv = random_string(common::crypto::kAesIvBytes);
  meta.key_id = std::string(key_id);
  std::string cipher = common::crypto::aes_ctr(key, meta.iv, value);
  return common::crypto::b64encode(cipher) + "; swift_meta=" + dump_crypto_meta(meta);
}

Result<std::string> decrypt_value(std::string_view key, std::string_view value, bool required) {
  auto extracted = extract_crypto_meta(value);
  if (!extracted.ok()) return extracted.status();
  if (!extracted->meta) {
    if (required) return Status::invalid_argument("Missing crypto meta in value");
    return std::string(value);
  }
  APUS_RETURN_IF_ERROR(check_crypto_meta(*extracted->meta));
  if (extracted->value.empty()) return std::string();
  auto cipher = common::crypto::strict_b64decode(extracted->value);
  if (!cipher) return Status::invalid_argument("encrypted value is not base64");
  return common::crypto::aes_ctr(key, extracted->meta->iv, *cipher);
}

std::string hmac_etag(std::string_view key, std::string_view etag) {
  return common::crypto::b64encode(common::crypto::hmac_bytes("sha256", key, etag));
}

std::string derive_key(std::string_view secret, std::string_view path) {
  return common::crypto::hmac_bytes("sha256", secret, path);
}

}  // namespace encryption

namespace {

using encryption::CryptoMeta;

std::optional<std::string> get_string(const HeaderMap& h, std::string_view name) {
  auto v = h.get(name);
  if (!v) return std::nullopt;
  return std::string(*v);
}


bool is_success(int status) { return status >= 200 && status < 300; }

constexpr std::string_view kBodyMeta = "X-Object-Sysmeta-Crypto-Body-Meta";
constexpr std::string_view kCryptoEtag = "X-Object-Sysmeta-Crypto-Etag";
constexpr std::string_view kCryptoEtagMac = "X-Object-Sysmeta-Crypto-Etag-Mac";
constexpr std::string_view kMetaPrefix = "X-Object-Transient-Sysmeta-Crypto-Meta-";
constexpr std::string_view kMetaMeta = "X-Object-Transient-Sysmeta-Crypto-Meta";
constexpr std::string_view kOverrideEtag = "X-Object-Sysmeta-Container-Update-Override-Etag";
constexpr std::string_view kUserMetaPrefix = "X-Object-Meta-";
constexpr std::string_view kMd5OfEmpty = "d41d8cd98f00b204e9800998ecf8427e";

// ---- keymaster -------------------------------------------------------------------------------

// A path's (account, container, object), empty where it has none.
struct KeyPath {
  std::string account, container, object;
  bool operator==(const KeyPath&) const = default;
};

// A Python 3 WSGI string's code points back to the bytes they stand for (Latin-1), when every
// code point is below 256.
std::optional<std::string> latin1_bytes(std::string_view utf8) {
  std::string out;
  for (size_t i = 0; i < utf8.size();) {
    unsigned char c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else if ((c == 0xc2 || c == 0xc3) && i + 1 < utf8.size()) {
      out.push_back(static_cast<char>(((c & 0x03) << 6) | (utf8[i + 1] & 0x3f)));
      i += 2;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// The reverse: each byte of `bytes` as the code point of the same value, in UTF-8 (how Swift's
// meta versions 1 and 2 write a path: as a WSGI string).
std::string wsgi_string(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back(static_cast<char>(0xc0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    }
  }
  return out;
}

struct RootSecrets {
  std::map<std::string, std::string> by_id;  // "" for the secret without an id
  std::string active_id;
  std::string version_to_write = "2";
  // S3's SSE-KMS keys by id (sse_kms_key_<id>): a local key store, as Ceph RGW's testing one.
  std::map<std::string, std::string> kms_keys;
};

// Key ids of Apus's own for S3's SSE-KMS and SSE-C objects, whose object keys do not come from
// the root secrets. Swift's keymaster refuses versions it does not know, so a Swift proxy
// answers 500 for such an object rather than send garbage.
constexpr std::string_view kKmsVersion = "apus-kms-1";
constexpr std::string_view kCustomerVersion = "apus-sse-c-1";

// What a request brings for S3's SSE (ProxyEnv's sse_* fields when it reached the keymaster).
struct SseKeys {
  std::string write_kms_key_id;
  std::string write_customer_key;
  std::string read_customer_key;
};

// Tells an SSE-C key from another without keeping anything that reveals it: a MAC keyed by it.
std::string customer_key_check(std::string_view customer_key) {
  return common::crypto::b64encode(
      common::crypto::hmac_bytes("sha256", customer_key, "apus sse-c key check"));
}

class Keymaster final : public Middleware {
 public:
  explicit Keymaster(RootSecrets secrets) : secrets_(std::move(secrets)) {}

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    const Request& req = ex.request();
    const std::string& m = req.method;
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 2, 4, true);
    if (!segs.ok() || !(m == "PUT" || m == "POST" || m == "GET" || m == "HEAD")) {
      co_return co_await next(ex, env);
    }
    KeyPath request{*(*segs)[1], (*segs)[2].value_or(""), (*segs)[3].value_or("")};
    SseKeys sse{env.sse_write_kms_key_id, env.sse_write_customer_key, env.sse_customer_key};
    FetchCryptoKeys before = env.fetch_crypto_keys;
    auto cache = std::make_shared<std::map<std::string, CryptoKeys>>();
    env.fetch_crypto_keys = [this, request, sse, before, cache](const std::string* key_id) {
      return fetch(request, sse, before, *cache, key_id);
    };
    co_await next(ex, env);
    env.fetch_crypto_keys = std::move(before);
  }

 private:
  // A key id: {"path": ..., "secret_id": ..., "v": ...} and `extra` members, as JSON.
  std::string key_id_json(std::string_view path, const std::string& secret_id,
                          std::string_view version, const json::object& extra = {}) const {
    json::object id = extra;
    id["path"] = version == "1" || version == "2" ? wsgi_string(path) : std::string(path);
    if (!secret_id.empty()) id["secret_id"] = secret_id;
    id["v"] = version;
    return json::serialize(id);  // sorted by dump_crypto_meta() where it is stored
  }

  // Swift's KeyMasterContext.fetch_crypto_keys(), and Apus's SSE-KMS and SSE-C keys.
  Result<CryptoKeys> fetch(const KeyPath& request, const SseKeys& sse,
                           const FetchCryptoKeys& before,
                           std::map<std::string, CryptoKeys>& cache,
                           const std::string* key_id) const {
    std::string secret_id = secrets_.active_id;
    std::string version = secrets_.version_to_write;
    std::string kms_key_id;
    std::string customer_key;  // for an SSE-C object key
    std::string stored_check;  // the SSE-C key check a stored id holds
    KeyPath key = request;
    if (key_id) {
      boost::system::error_code ec;
      json::value v = json::parse(*key_id, ec);
      if (ec || !v.is_object()) return Status::invalid_argument("bad key id");
      const json::object& o = v.get_object();
      const json::value* ver = o.if_contains("v");
      const json::value* path = o.if_contains("path");
      if (!ver || !ver->is_string() || !path || !path->is_string()) {
        return Status::invalid_argument("bad key id");
      }
      version = std::string(ver->get_string());
      const bool apus = version == kKmsVersion || version == kCustomerVersion;
      if (version != "1" && version != "2" && version != "3" && !apus) {
        return Status::invalid_argument("Unknown key_id version: " + version);
      }
      auto text = [&o](std::string_view name) {
        const json::value* f = o.if_contains(name);
        return f && f->is_string() ? std::string(f->get_string()) : std::string();
      };
      secret_id = text("secret_id");
      kms_key_id = text("kms_key_id");
      stored_check = text("sse_c_check");
      if (version == kKmsVersion && kms_key_id.empty()) return Status::invalid_argument("bad key id");
      if (version == kCustomerVersion) {
        if (stored_check.empty()) return Status::invalid_argument("bad key id");
        customer_key = sse.read_customer_key;
      }
      std::string stored(path->get_string());
      if (version == "1" && !stored.starts_with("/" + request.account + "/")) {
        // Meta version 1 could name just the object: the request's account and container.
        key = KeyPath{request.account, request.container, stored};
      } else {
        auto parts = common::http::split_path(stored, 1, 3, true);
        if (!parts.ok()) return Status::invalid_argument("bad key id path");
        key = KeyPath{*(*parts)[0], (*parts)[1].value_or(""), (*parts)[2].value_or("")};
      }
      KeyPath check{request.account, request.container.empty() ? key.container : request.container,
                    request.object.empty() ? key.object : request.object};
      if ((version == "1" || version == "2") && key != check) {
        // Versions 1 and 2 written by a Python 3 proxy hold the path as a WSGI string.
        auto a = latin1_bytes(key.account), c = latin1_bytes(key.container),
             ob = latin1_bytes(key.object);
        if (a && c && ob) {
          KeyPath alt{*a, *c, *ob};
          if (alt == check || (alt.account == check.account &&
                               alt.container == check.container && request.object.empty())) {
            key = alt;
          }
        }
      }
      if (key != check) {
        APUS_LOG_INFO("keymaster: path stored in crypto meta differs from the request's; "
                      "using the stored one");
      }
    } else if (!sse.write_customer_key.empty()) {
      version = kCustomerVersion;
      customer_key = sse.write_customer_key;
      stored_check = customer_key_check(customer_key);
    } else if (!sse.write_kms_key_id.empty()) {
      version = kKmsVersion;
      kms_key_id = sse.write_kms_key_id;
    }
    std::string cache_key = secret_id + '\n' + version + '\n' + kms_key_id + '\n' + stored_check +
                            '\n' + key.account + '\n' + key.container + '\n' + key.object;
    if (auto hit = cache.find(cache_key); hit != cache.end()) return hit->second;
    auto secret = secrets_.by_id.find(secret_id);
    if (secret == secrets_.by_id.end()) {
      if (before) return before(key_id);  // an earlier keymaster may know it
      APUS_LOG_WARNING("keymaster: unrecognised secret id: " + secret_id);
      return Status::not_found("unknown secret id " + secret_id);
    }
    CryptoKeys keys;
    if (request.container.empty()) return keys;
    std::string path = "/" + key.account + "/" + key.container;
    keys.container = encryption::derive_key(secret->second, path);
    if (!request.object.empty()) {
      path = version == "1" && key.object.starts_with('/') ? key.object : path + "/" + key.object;
      if (version == kKmsVersion) {
        auto kms = secrets_.kms_keys.find(kms_key_id);
        if (kms == secrets_.kms_keys.end()) {
          return Status::precondition_failed(key_id ? "unknown KMS key " + kms_key_id : "kms-key");
        }
        keys.object = encryption::derive_key(kms->second, path);
      } else if (version == kCustomerVersion) {
        if (customer_key.empty()) return Status::precondition_failed("missing");
        if (!common::crypto::streq_const_time(customer_key_check(customer_key), stored_check)) {
          return Status::precondition_failed("mismatch");
        }
        keys.object = encryption::derive_key(customer_key, path);
      } else {
        keys.object = encryption::derive_key(secret->second, path);
      }
    }
    json::object extra;
    if (version == kKmsVersion) extra["kms_key_id"] = kms_key_id;
    if (version == kCustomerVersion) extra["sse_c_check"] = stored_check;
    const bool apus = version == kKmsVersion || version == kCustomerVersion;
    keys.id = key_id_json(path, secret_id, version, extra);
    if (apus) {
      keys.container_id = key_id_json(path, secret_id, secrets_.version_to_write);
      keys.all_ids.push_back(keys.id);
    } else {
      for (const auto& [id, unused] : secrets_.by_id) {
        keys.all_ids.push_back(key_id_json(path, id, version));
      }
      // Conditional requests on an SSE-C object compare with its ETag's MAC under the
      // client's key.
      if (!sse.read_customer_key.empty() && !request.object.empty()) {
        json::object c;
        c["sse_c_check"] = customer_key_check(sse.read_customer_key);
        keys.all_ids.push_back(key_id_json(path, secret_id, kCustomerVersion, c));
      }
    }
    cache.emplace(std::move(cache_key), keys);
    return keys;
  }

  const RootSecrets secrets_;
};

// The keymaster's options: encryption_root_secret[_<id>] (base64 of at least 32 bytes),
// active_root_secret_id, meta_version_to_write; or keymaster_config_path naming a file whose
// [keymaster] section has them.
Result<RootSecrets> root_secrets(const common::Section& filter) {
  common::Section conf = filter;
  common::Config file;
  if (auto path = filter.get("keymaster_config_path"); path && !path->empty()) {
    std::vector<std::string> bad;
    for (const auto& [name, value] : filter.items()) {
      if (name.starts_with("encryption_root_secret") || name == "active_root_secret_id") {
        bad.push_back(name);
      }
    }
    if (!bad.empty()) {
      std::string names;
      for (const auto& b : bad) names += (names.empty() ? "" : ", ") + b;
      return Status::invalid_argument(
          "keymaster_config_path is set, but there are other config options specified: " +
          names);
    }
    APUS_ASSIGN_OR_RETURN(file, common::Config::load(*path));
    conf = file.section("keymaster");
  }
  RootSecrets secrets;
  for (const auto& [name, value] : conf.items()) {
    if (!name.starts_with("encryption_root_secret")) continue;
    std::string_view suffix = std::string_view(name).substr(22);
    if (!suffix.empty() && (suffix[0] != '_' || suffix.size() < 2)) {
      return Status::invalid_argument("Malformed root secret option name " + name);
    }
    std::string text;
    for (char c : value) {
      if (c != '\n' && c != '\r') text.push_back(c);
    }
    auto secret = common::crypto::strict_b64decode(text);
    if (!secret || secret->size() < 32) {
      return Status::invalid_argument(
          name + " option in proxy-server.conf must be a base64 encoding of at least 32 raw bytes");
    }
    secrets.by_id[suffix.empty() ? std::string() : std::string(suffix.substr(1))] =
        std::move(*secret);
  }
  for (const auto& [name, value] : conf.items()) {
    if (!name.starts_with("sse_kms_key_") || name.size() == 12) continue;
    auto key = common::crypto::strict_b64decode(value);
    if (!key || key->size() != 32) {
      return Status::invalid_argument(name + " must be a base64 encoding of 32 raw bytes");
    }
    secrets.kms_keys[name.substr(12)] = std::move(*key);
  }
  secrets.active_id = conf.get_string("active_root_secret_id");
  if (!secrets.by_id.contains(secrets.active_id)) {
    return Status::invalid_argument("No secret loaded for active_root_secret_id " +
                                    (secrets.active_id.empty() ? "None" : secrets.active_id));
  }
  secrets.version_to_write = conf.get_string("meta_version_to_write", "2");
  if (secrets.version_to_write.empty()) secrets.version_to_write = "2";
  const std::string& v = secrets.version_to_write;
  if (v != "1" && v != "2" && v != "3") {
    return Status::invalid_argument("Unknown/unsupported metadata version: '" + v + "'");
  }
  return secrets;
}

// ---- encryption: writes ----------------------------------------------------------------------

Response error_500(std::string body) {
  Response r = common::http::text_response(500, std::move(body));
  return r;
}

Response keys_error() { return error_500("Unable to retrieve encryption keys."); }

// The object's request keys, with the object and container keys checked.
Result<CryptoKeys> request_keys(const ProxyEnv& env, const std::string* key_id,
                                bool need_container) {
  if (!env.fetch_crypto_keys) return Status::unavailable("no keymaster in the pipeline");
  auto keys = env.fetch_crypto_keys(key_id);
  if (!keys.ok()) return keys.status();
  if (keys->object.size() != common::crypto::kAesKeyBytes ||
      (need_container && keys->container.size() != common::crypto::kAesKeyBytes)) {
    return Status::unavailable("bad keys from the keymaster");
  }
  return keys;
}

// Every non-empty X-Object-Meta-<name> becomes X-Object-Transient-Sysmeta-Crypto-Meta-<name>
// holding it encrypted; X-Object-Transient-Sysmeta-Crypto-Meta then names cipher and key id.
void encrypt_user_metadata(HeaderMap& h, const CryptoKeys& keys) {
  std::vector<std::pair<std::string, std::string>> user;
  for (const auto& [name, value] : h) {
    if (!value.empty() && common::http::istarts_with(name, kUserMetaPrefix)) {
      user.emplace_back(name, value);
    }
  }
  if (user.empty()) return;
  for (const auto& [name, value] : user) {
    h.erase(name);
    h.set(std::string(kMetaPrefix) + name.substr(kUserMetaPrefix.size()),
          encryption::encrypt_value(keys.object, value));
  }
  CryptoMeta marker;
  marker.key_id = keys.id;
  h.set(std::string(kMetaMeta), encryption::dump_crypto_meta(marker));
}

// The PUT body on its way to the object servers: encrypted with a new random key, both the
// plaintext and the ciphertext hashed. Nothing is set up for an empty body, which stays
// unencrypted (as in Swift).
class EncryptingExchange final : public common::http::ExchangeWrapper {
 public:
  EncryptingExchange(Exchange& inner, const CryptoKeys& keys)
      : ExchangeWrapper(inner), keys_(keys) {}

  net::awaitable<Result<size_t>> read_body(std::span<char> buf) override {
    auto n = co_await ExchangeWrapper::read_body(buf);
    if (n.ok() && *n > 0) {
      if (!stream_) start();
      std::string_view plain(buf.data(), *n);
      plain_md5_.update(plain);
      stream_->apply(plain, buf.data());
      cipher_md5_.update(std::string_view(buf.data(), *n));
    }
    co_return n;
  }

  bool encrypted() const { return stream_ != nullptr; }
  std::string plaintext_etag() const { return plain_md5_.hex_digest(); }
  std::string ciphertext_etag() const { return cipher_md5_.hex_digest(); }
  const CryptoMeta& body_meta() const { return body_meta_; }

 protected:
  net::awaitable<Status> do_respond(Response response) override {
    fix_etag(response.status, response.headers);
    return ExchangeWrapper::do_respond(std::move(response));
  }
  net::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                           std::optional<uint64_t> length) override {
    fix_etag(status, headers);
    return ExchangeWrapper::do_start_response(status, std::move(headers), length);
  }

 private:
  void start() {
    std::string body_key = random_string(common::crypto::kAesKeyBytes);
    body_meta_.iv = random_string(common::crypto::kAesIvBytes);
    encryption::WrappedKey wrapped;
    wrapped.iv = random_string(common::crypto::kAesIvBytes);
    wrapped.key = common::crypto::aes_ctr(keys_.object, wrapped.iv, body_key);
    body_meta_.body_key = std::move(wrapped);
    body_meta_.key_id = keys_.id;
    stream_ = std::make_unique<common::crypto::AesCtr>(body_key, body_meta_.iv);
  }

  // The object servers' ETag is the ciphertext's: the client sees its own data's.
  void fix_etag(int status, HeaderMap& h) const {
    if (!is_success(status) || !stream_) return;
    auto etag = h.get("Etag");
    if (!etag || common::http::normalize_etag(*etag) != ciphertext_etag()) return;
    bool quoted = etag->starts_with('"');
    h.set("Etag", quoted ? "\"" + plaintext_etag() + "\"" : plaintext_etag());
  }

  const CryptoKeys& keys_;
  std::unique_ptr<common::crypto::AesCtr> stream_;
  CryptoMeta body_meta_;
  common::crypto::Md5 plain_md5_;
  common::crypto::Md5 cipher_md5_;
};

// The answer when the keymaster refused for want of the client's own key (S3's SSE-C: none,
// or another than the object was stored with) or of a KMS key a write names; s3api reads
// env.sse_refusal to answer in S3's terms.
std::optional<Response> client_key_refusal(const Status& s, ProxyEnv& env) {
  if (!s.is_precondition_failed()) return std::nullopt;
  const std::string& why = s.message();
  if (why == "missing") {
    if (env.sse_refusal) *env.sse_refusal = why;
    return common::http::text_response(400, "The object was stored with a key the client must send.");
  }
  if (why == "mismatch") {
    if (env.sse_refusal) *env.sse_refusal = why;
    return common::http::text_response(400, "The key given is not the one the object was stored with.");
  }
  if (why == "kms-key") {
    if (env.sse_refusal) *env.sse_refusal = why;
    return common::http::text_response(400, "No such KMS key.");
  }
  return std::nullopt;
}

// ---- encryption: reads -----------------------------------------------------------------------

// The first byte of a Content-Range ("bytes 10-19/100").
uint64_t range_start(std::string_view content_range) {
  size_t space = content_range.find(' ');
  std::string_view rest = content_range.substr(space == std::string_view::npos ? 0 : space + 1);
  uint64_t start = 0;
  for (char c : rest) {
    if (c < '0' || c > '9') break;
    start = start * 10 + static_cast<uint64_t>(c - '0');
  }
  return start;
}

std::string mime_boundary_of(std::string_view content_type) {
  size_t at = content_type.find("boundary=");
  if (at == std::string_view::npos) return {};
  std::string_view b = content_type.substr(at + 9);
  b = b.substr(0, b.find(';'));
  b = strip_ws(b);
  if (b.size() >= 2 && b.front() == '"' && b.back() == '"') b = b.substr(1, b.size() - 2);
  return std::string(b);
}

// An object GET or HEAD answer on its way out: headers decrypted, crypto sysmeta removed, the
// body decrypted from the offset its Content-Range names (each part of a multipart/byteranges
// answer from its own). A multipart answer's parts are written again as they came
// ("--<boundary>", the part's header lines, a blank line, its bytes, CRLF; "--<boundary>--"),
// byte for byte the framing of Swift's and Apus's object servers, so its length stands, as
// Swift's decrypter has it.
class DecryptingExchange final : public common::http::ExchangeWrapper {
 public:
  DecryptingExchange(Exchange& inner, ProxyEnv& env) : ExchangeWrapper(inner), env_(env) {}

  net::awaitable<Status> write_body(std::string_view chunk) override {
    if (failed_) co_return Status::cancelled("decryption failed");
    if (splitter_) co_return co_await write_parts(chunk);
    if (!stream_) co_return co_await ExchangeWrapper::write_body(chunk);
    scratch_.resize(chunk.size());
    stream_->apply(chunk, scratch_.data());
    co_return co_await ExchangeWrapper::write_body(scratch_);
  }

  net::awaitable<Status> finish_response() override {
    if (failed_) co_return Status::cancelled("decryption failed");
    if (splitter_) {
      splitter_->finish();
      APUS_CO_RETURN_IF_ERROR(co_await drain_parts());
    }
    co_return co_await ExchangeWrapper::finish_response();
  }

 protected:
  net::awaitable<Status> do_respond(Response response) override {
    if (auto refusal = prepare(response.status, response.headers)) {
      co_return co_await ExchangeWrapper::do_respond(std::move(*refusal));
    }
    if (splitter_) {
      // A whole multipart answer: sent as a stream, its parts framed anew as they came.
      std::string body = std::move(response.body);
      const uint64_t length = body.size();
      APUS_CO_RETURN_IF_ERROR(co_await ExchangeWrapper::do_start_response(
          response.status, std::move(response.headers), length));
      APUS_CO_RETURN_IF_ERROR(co_await write_parts(body));
      co_return co_await finish_response();
    }
    if (stream_ && !response.body.empty()) {
      stream_->apply(response.body, response.body.data());
    }
    co_return co_await ExchangeWrapper::do_respond(std::move(response));
  }

  net::awaitable<Status> do_start_response(int status, HeaderMap headers,
                                           std::optional<uint64_t> length) override {
    if (auto refusal = prepare(status, headers)) {
      failed_ = true;
      (void)co_await ExchangeWrapper::do_respond(std::move(*refusal));
      co_return Status::cancelled("decryption failed");
    }
    co_return co_await ExchangeWrapper::do_start_response(status, std::move(headers), length);
  }

 private:
  // Swift's DecrypterObjContext.handle(): the response's headers decrypted in place and the body
  // stream set up; a 500 response when something cannot be decrypted.
  std::optional<Response> prepare(int status, HeaderMap& h) {
    const bool readable = is_success(status) || status == 304 || status == 412;
    std::optional<CryptoMeta> body_meta, meta_meta;
    if (readable) {
      if (auto v = h.get(kBodyMeta)) {
        auto meta = encryption::load_crypto_meta(*v);
        if (!meta.ok() || !encryption::check_crypto_meta(*meta).ok()) {
          APUS_LOG_ERROR("Error decrypting object: bad body crypto meta");
          return error_500("Error decrypting object");
        }
        body_meta = std::move(*meta);
      }
      if (auto v = h.get(kMetaMeta)) {
        auto meta = encryption::load_crypto_meta(*v);
        if (!meta.ok()) {
          APUS_LOG_ERROR("Error decrypting object: bad metadata crypto meta");
          return error_500("Error decrypting object");
        }
        meta_meta = std::move(*meta);
      }
    }
    auto key_id = [](const std::optional<CryptoMeta>& m) -> const std::string* {
      return m && !m->key_id.empty() ? &m->key_id : nullptr;
    };
    auto put_keys = request_keys(env_, key_id(body_meta), true);
    if (!put_keys.ok()) return keys_failure(put_keys.status(), env_);
    auto post_keys = request_keys(env_, key_id(meta_meta), false);
    if (!post_keys.ok()) return keys_failure(post_keys.status(), env_);

    HeaderMap decrypted;
    if (auto v = h.get(kCryptoEtag); v && !v->empty()) {
      auto etag = encryption::decrypt_value(put_keys->object, *v, true);
      if (!etag.ok()) return header_failure(kCryptoEtag);
      // The stored HMAC of the ETag tells whether these are the keys it was written with.
      // Swift does not look, and with a wrong root secret sends garbage as the object.
      auto mac = h.get(kCryptoEtagMac);
      if (mac && !common::crypto::streq_const_time(
                     *mac, encryption::hmac_etag(put_keys->object, *etag))) {
        APUS_LOG_ERROR("Error decrypting object: the keys do not match the stored ETag's MAC "
                       "(a different root secret?)");
        return error_500("Error decrypting object");
      }
      decrypted.set("Etag", *etag);
    }
    if (auto v = h.get(kOverrideEtag); v && !v->empty()) {
      auto etag = encryption::decrypt_value(put_keys->container, *v, false);
      if (!etag.ok()) return header_failure(kOverrideEtag);
      decrypted.set(std::string(kOverrideEtag), *etag);
    }
    for (const auto& [name, value] : h) {
      if (value.empty() || !common::http::istarts_with(name, kMetaPrefix)) continue;
      auto plain = encryption::decrypt_value(post_keys->object, value, true);
      if (!plain.ok()) return header_failure(name);
      decrypted.set("X-Object-Meta-" + name.substr(kMetaPrefix.size()), *plain);
    }
    for (const auto& [name, value] : decrypted) h.set(name, value);
    // What only the encryption middleware reads never leaves the proxy.
    std::vector<std::string> purge;
    for (const auto& [name, value] : h) {
      if (common::http::istarts_with(name, "X-Object-Sysmeta-Crypto-") ||
          common::http::istarts_with(name, "X-Object-Transient-Sysmeta-Crypto-")) {
        purge.push_back(name);
      }
    }
    for (const auto& name : purge) h.erase(name);

    if (body_meta && ex_method() == "GET" && is_success(status)) {
      if (!body_meta->body_key ||
          body_meta->body_key->key.size() != common::crypto::kAesKeyBytes ||
          body_meta->body_key->iv.size() != common::crypto::kAesIvBytes) {
        APUS_LOG_ERROR("Error decrypting object: bad wrapped body key");
        return error_500("Error decrypting object");
      }
      body_key_ = common::crypto::aes_ctr(put_keys->object, body_meta->body_key->iv,
                                          body_meta->body_key->key);
      body_iv_ = body_meta->iv;
      std::string_view type = h.get_or("Content-Type", "");
      if (status == 206 && common::http::istarts_with(type, "multipart/byteranges")) {
        std::string boundary = mime_boundary_of(type);
        if (boundary.empty()) return error_500("Error decrypting object");
        splitter_.emplace(boundary);
        boundary_ = boundary;
      } else {
        uint64_t offset = 0;
        if (auto cr = h.get("Content-Range")) offset = range_start(*cr);
        stream_ = std::make_unique<common::crypto::AesCtr>(body_key_, body_iv_, offset);
      }
    }
    return std::nullopt;
  }

  const std::string& ex_method() const { return request().method; }

  static Response keys_failure(const Status& s, ProxyEnv& env) {
    if (auto refusal = client_key_refusal(s, env)) return std::move(*refusal);
    APUS_LOG_ERROR("encryption: get_keys(): " + s.message());
    return keys_error();
  }
  static Response header_failure(std::string_view header) {
    APUS_LOG_ERROR("Error decrypting header " + std::string(header));
    return error_500("Error decrypting header");
  }

  // Feeds a multipart answer's bytes through the splitter and sends each part decrypted.
  net::awaitable<Status> write_parts(std::string_view chunk) {
    splitter_->feed(chunk);
    co_return co_await drain_parts();
  }

  net::awaitable<Status> drain_parts() {
    using Event = common::http::MimeSplitter::Event;
    for (;;) {
      Event e = splitter_->next();
      switch (e) {
        case Event::kNeedMore:
          co_return Status();
        case Event::kHeaders: {
          std::string head = "--" + boundary_ + "\r\n";
          for (const auto& [name, value] : splitter_->headers()) {
            head.append(name).append(": ").append(value).append("\r\n");
          }
          head += "\r\n";
          uint64_t offset = range_start(splitter_->headers().get_or("Content-Range", ""));
          stream_ = std::make_unique<common::crypto::AesCtr>(body_key_, body_iv_, offset);
          APUS_CO_RETURN_IF_ERROR(co_await ExchangeWrapper::write_body(head));
          break;
        }
        case Event::kData: {
          std::string_view data = splitter_->data();
          scratch_.resize(data.size());
          stream_->apply(data, scratch_.data());
          APUS_CO_RETURN_IF_ERROR(co_await ExchangeWrapper::write_body(scratch_));
          break;
        }
        case Event::kEndOfDocument:
          APUS_CO_RETURN_IF_ERROR(co_await ExchangeWrapper::write_body("\r\n"));
          break;
        case Event::kEnd:
          APUS_CO_RETURN_IF_ERROR(co_await ExchangeWrapper::write_body("--" + boundary_ + "--"));
          splitter_.reset();
          co_return Status();
        case Event::kError:
          APUS_LOG_ERROR("Error decrypting object: bad multipart answer: " + splitter_->error());
          failed_ = true;
          co_return Status::cancelled("bad multipart answer");
      }
    }
  }

  ProxyEnv& env_;
  bool failed_ = false;
  std::string body_key_, body_iv_;
  std::unique_ptr<common::crypto::AesCtr> stream_;
  std::optional<common::http::MimeSplitter> splitter_;
  std::string boundary_;
  std::string scratch_;
};

// ---- the encryption middleware ---------------------------------------------------------------

class Encryption final : public Middleware {
 public:
  Encryption(bool disable_encryption, const common::Constraints& constraints,
             size_t max_listing)
      : disable_encryption_(disable_encryption),
        constraints_(constraints),
        max_listing_(max_listing) {}

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    if (env.crypto_override) co_return co_await next(ex, env);
    const Request& req = ex.request();
    auto segs = common::http::split_path(common::http::percent_decode(req.path()), 3, 4, true);
    if (!segs.ok()) co_return co_await next(ex, env);
    // As Python's truth test has it: an empty name ("/v1/a/c/") is none.
    const bool object = !(*segs)[3].value_or("").empty();
    const bool container = !(*segs)[2].value_or("").empty();
    const std::string& m = req.method;
    if (object && m == "PUT" && !disable_encryption_) co_return co_await put(ex, env, next);
    if (object && m == "POST" && !disable_encryption_) co_return co_await post(ex, env, next);
    if (object && (m == "GET" || m == "HEAD")) co_return co_await get_object(ex, env, next);
    if (!object && container && m == "GET") co_return co_await get_container(ex, env, next);
    co_await next(ex, env);
  }

 private:
  // Swift checks metadata before encrypting it: the encrypted values are longer.
  std::optional<Response> bad_metadata(const Request& req) const {
    auto bad = common::check_metadata(constraints_, req.headers, common::MetadataTarget::kObject);
    if (!bad.ok()) return common::http::text_response(bad.status, bad.body);
    return std::nullopt;
  }

  net::awaitable<void> put(Exchange& ex, ProxyEnv& env, const Next& next) {
    if (auto bad = bad_metadata(ex.request())) co_return co_await ex.reply(std::move(*bad));
    auto keys = request_keys(env, nullptr, true);
    if (!keys.ok()) {
      if (auto refusal = client_key_refusal(keys.status(), env)) {
        co_return co_await ex.reply(std::move(*refusal));
      }
      APUS_LOG_ERROR("encryption: get_keys(): " + keys.status().message());
      co_return co_await ex.reply(keys_error());
    }
    EncryptingExchange wrapped(ex, *keys);
    HeaderMap& h = wrapped.mutable_request().headers;
    encrypt_user_metadata(h, *keys);
    std::optional<std::string> client_etag = get_string(h, "Etag");
    h.erase("Etag");
    std::optional<std::string> listing_etag = get_string(h, kOverrideEtag);

    auto before = std::move(env.update_footers);
    env.update_footers = [&wrapped, &keys, &before, client_etag,
                          listing_etag](HeaderMap& footers) -> std::optional<Response> {
      if (before) {
        if (auto refusal = before(footers)) return refusal;
      }
      std::string plaintext_etag;
      if (wrapped.encrypted()) {
        plaintext_etag = wrapped.plaintext_etag();
        std::optional<std::string> to_check = get_string(footers, "Etag");
        if (!to_check) to_check = client_etag;
        if (to_check && common::http::normalize_etag(*to_check) != plaintext_etag) {
          return common::http::swob_response(422);
        }
        footers.set("Etag", wrapped.ciphertext_etag());
        footers.set(std::string(kCryptoEtag), encryption::encrypt_value(keys->object,
                                                                        plaintext_etag));
        footers.set(std::string(kBodyMeta), encryption::dump_crypto_meta(wrapped.body_meta()));
        footers.set(std::string(kCryptoEtagMac), encryption::hmac_etag(keys->object,
                                                                      plaintext_etag));
      } else if (client_etag && !footers.contains("Etag")) {
        footers.set("Etag", *client_etag);
      }
      std::optional<std::string> listing = get_string(footers, kOverrideEtag);
      if (!listing) listing = listing_etag;
      if (!listing && !plaintext_etag.empty()) listing = plaintext_etag;
      if (listing && !listing->empty() && (*listing != kMd5OfEmpty || !plaintext_etag.empty())) {
        footers.set(std::string(kOverrideEtag),
                    encryption::encrypt_value(keys->container, *listing,
                                              keys->container_id.empty() ? keys->id
                                                                         : keys->container_id));
      }
      return std::nullopt;
    };
    co_await next(wrapped, env);
    env.update_footers = std::move(before);
  }

  net::awaitable<void> post(Exchange& ex, ProxyEnv& env, const Next& next) {
    if (auto bad = bad_metadata(ex.request())) co_return co_await ex.reply(std::move(*bad));
    auto keys = request_keys(env, nullptr, false);
    if (!keys.ok()) {
      APUS_LOG_ERROR("encryption: get_keys(): " + keys.status().message());
      co_return co_await ex.reply(keys_error());
    }
    common::http::ExchangeWrapper wrapped(ex);
    encrypt_user_metadata(wrapped.mutable_request().headers, *keys);
    co_await next(wrapped, env);
  }

  // Conditional requests compare with the stored ETag's HMAC (X-Object-Sysmeta-Crypto-Etag-Mac,
  // under every root secret it may have been made with), and with the ETag itself for an
  // object stored unencrypted.
  static Status mask_conditional_etags(HeaderMap& h, const ProxyEnv& env, bool& masked) {
    for (std::string_view name : {"If-Match", "If-None-Match"}) {
      auto value = h.get(name);
      if (!value || value->empty()) continue;
      std::vector<CryptoKeys> all;
      auto active = request_keys(env, nullptr, false);
      if (!active.ok()) return active.status();
      all.push_back(*active);
      for (const std::string& id : active->all_ids) {
        if (id == active->id) continue;
        auto other = request_keys(env, &id, false);
        if (!other.ok()) return other.status();
        all.push_back(std::move(*other));
      }
      std::string out;
      size_t start = 0;
      for (;;) {
        size_t comma = value->find(',', start);
        std::string_view tag = common::http::normalize_etag(
            strip_ws(std::string_view(*value).substr(start, comma - start)));
        if (!tag.empty()) {
          if (!out.empty()) out += ", ";
          if (tag == "*") {
            out += "*";
          } else {
            out += "\"" + std::string(tag) + "\"";
            for (const CryptoKeys& k : all) {
              out += ", \"" + encryption::hmac_etag(k.object, tag) + "\"";
            }
          }
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      h.set(name, out);
      masked = true;
    }
    return Status();
  }

  net::awaitable<void> get_object(Exchange& ex, ProxyEnv& env, const Next& next) {
    DecryptingExchange wrapped(ex, env);
    HeaderMap& h = wrapped.mutable_request().headers;
    bool masked = false;
    if (Status s = mask_conditional_etags(h, env, masked); !s.ok()) {
      APUS_LOG_ERROR("encryption: get_keys(): " + s.message());
      co_return co_await ex.reply(keys_error());
    }
    if (masked) {
      std::string at(h.get_or("X-Backend-Etag-Is-At", ""));
      h.set("X-Backend-Etag-Is-At", at.empty() ? std::string(kCryptoEtagMac)
                                               : at + "," + std::string(kCryptoEtagMac));
    }
    co_await next(wrapped, env);
  }

  // A JSON listing's `hash` values decrypted with the container key; one that cannot be shows
  // "<unknown>", as in Swift.
  net::awaitable<void> get_container(Exchange& ex, ProxyEnv& env, const Next& next) {
    ResponseCapture held(ex, max_listing_);
    co_await next(held, env);
    if (held.too_big) co_return co_await ex.reply(common::http::swob_response(500));
    if (held.held.status == 0) co_return;
    Response r = std::move(held.held);
    std::string_view type = r.headers.get_or("Content-Type", "");
    if (is_success(r.status) && type.substr(0, type.find(';')) == "application/json") {
      boost::system::error_code ec;
      json::value listing = json::parse(r.body, ec);
      if (ec || !listing.is_array()) co_return co_await ex.reply(common::http::swob_response(500));
      std::map<std::string, std::optional<std::string>> keys_by_id;
      for (json::value& item : listing.get_array()) {
        json::value* hash = item.is_object() ? item.get_object().if_contains("hash") : nullptr;
        if (!hash || !hash->is_string()) continue;
        hash->emplace_string() = decrypt_listing_hash(std::string(hash->get_string()), env,
                                                      keys_by_id);
      }
      std::string body;
      common::listing::append_python_json(body, listing);
      r.body = std::move(body);
      r.headers.erase("Content-Length");
    }
    co_await ex.reply(std::move(r));
  }

  static std::string decrypt_listing_hash(const std::string& value, const ProxyEnv& env,
                                          std::map<std::string, std::optional<std::string>>& keys) {
    auto extracted = encryption::extract_crypto_meta(value);
    if (!extracted.ok()) return "<unknown>";
    if (!extracted->meta) return value;
    if (!encryption::check_crypto_meta(*extracted->meta).ok()) return "<unknown>";
    const std::string& id = extracted->meta->key_id;
    auto known = keys.find(id);
    if (known == keys.end()) {
      std::optional<std::string> key;
      if (env.fetch_crypto_keys) {
        auto fetched = env.fetch_crypto_keys(id.empty() ? nullptr : &id);
        if (fetched.ok() && fetched->container.size() == common::crypto::kAesKeyBytes) {
          key = fetched->container;
        } else {
          APUS_LOG_ERROR("Error decrypting container listing: " +
                         (fetched.ok() ? std::string("no container key")
                                       : fetched.status().message()));
        }
      }
      known = keys.emplace(id, std::move(key)).first;
    }
    if (!known->second) return "<unknown>";
    auto cipher = common::crypto::strict_b64decode(extracted->value);
    if (!cipher) return "<unknown>";
    return common::crypto::aes_ctr(*known->second, extracted->meta->iv, *cipher);
  }

  const bool disable_encryption_;
  const common::Constraints& constraints_;
  const size_t max_listing_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_keymaster(const common::Section& section,
                                                   const MiddlewareContext&) {
  auto secrets = root_secrets(section);
  if (!secrets.ok()) {
    return Status::invalid_argument("[" + section.name() + "]: " + secrets.status().message());
  }
  return std::unique_ptr<Middleware>(std::make_unique<Keymaster>(std::move(*secrets)));
}

Result<std::unique_ptr<Middleware>> make_encryption(const common::Section& section,
                                                    const MiddlewareContext& context) {
  bool disable = false;
  APUS_ASSIGN_OR_RETURN(disable, section.get_bool("disable_encryption", false));
  // Without a keymaster before it every object request would fail (Swift starts and answers
  // 500 to each one): refuse to start instead.
  const auto& p = context.pipeline;
  auto self = std::find(p.begin(), p.end(), "encryption");
  if (!p.empty() && std::find(p.begin(), self, "keymaster") == self) {
    return Status::invalid_argument("[" + section.name() +
                                    "]: encryption needs a keymaster before it in the pipeline");
  }
  return std::unique_ptr<Middleware>(std::make_unique<Encryption>(
      disable, context.swift.constraints, max_listing_body(context.swift.constraints)));
}

}  // namespace apus::proxy
