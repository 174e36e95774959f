// apus-bench: a load generator speaking Swift's API (tempauth v1.0), for A/B runs of Apus
// against stock Swift (bench/ab.sh) and for anyone checking our figures.
//
//   apus-bench --auth http://127.0.0.1:8080/auth/v1.0 [--user test:tester] [--key testing]
//              [--workload put|get|head|delete|post|list|mixed] [--mix get=80,put=20]
//              [--size 4KiB | --sizes 4KiB:90,1MiB:10] [--concurrency 32] [--threads 2]
//              [--duration 10 | --count N] [--warmup 2] [--containers 4] [--objects N]
//              [--endpoints 127.0.0.1:8081,127.0.0.1:8082] [--prefix bench] [--json FILE]
//              [--verify full|headers] [--label TEXT] [--slo-segment 100MiB]
//              [--api swift|s3]
//
// Each of `concurrency` clients keeps one keep-alive connection (to one of --endpoints,
// round robin: the "direct" topology; by default the storage URL's host: one ingress, the "HA
// path") and sends one request after another; clients are spread over `threads` event loops.
// Objects are <prefix>-c<k>/o<i>, object i in container i % containers; each client owns its
// own objects, so the clients share nothing. Every run but a pure PUT run first uploads
// --objects objects (default: 4 per client) in a setup phase. Every answer is checked:
// the status, the length, and for GETs the ETag header and (--verify full, the default) the
// MD5 of the body received, so a wrong answer counts as an error, never as a fast one.
// PUT bodies are generated (no file I/O) and their ETag answer checked against our own MD5.
// With --slo-segment every object is a static large object: its segments (<name>_seg/<n>, in
// the object's container) are PUT first, then the manifest (?multipart-manifest=put); reads
// then exercise the proxy's segment streaming, and a GET's ETag is checked against the one the
// manifest PUT answered (the MD5 of the segment ETags, not of the body).
// With --api s3 the objects are read and written through the S3 API (the proxy's s3api, with
// --user and --key as the access key and secret, path-style, Version 4 header signatures with
// UNSIGNED-PAYLOAD), the same buckets and keys: the cost of the S3 path against the Swift one.
//
// Prints a table and writes JSON (--json FILE, or "-" for stdout): operations, ops/s, MiB/s,
// latency percentiles and errors by cause, per operation and in all; a per-second timeline;
// where the wall-clock went (auth, setup, warm-up, measured window); the client's CPU seconds
// (if it nears the machine, the figure is the client's); and Little's law (operations x mean
// latency / window, which should be close to the concurrency).
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/crypto/hmac.h"
#include "common/crypto/md5.h"

namespace net = boost::asio;
using net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kTuple = net::as_tuple(net::use_awaitable);
constexpr size_t kChunk = 64 * 1024;

enum class Op { kPut, kGet, kHead, kDelete, kPost, kList };
constexpr std::array<const char*, 6> kOpNames = {"PUT", "GET", "HEAD", "DELETE", "POST", "LIST"};

struct Endpoint {
  std::string host;
  uint16_t port = 0;
};

struct Options {
  std::string auth_url;
  std::string user = "test:tester";
  std::string key = "testing";
  std::string workload = "put";
  std::vector<std::pair<Op, double>> mix;             // operation, weight
  std::vector<std::pair<uint64_t, double>> sizes = {{4096, 1}};  // bytes, weight
  int concurrency = 1;
  int threads = 1;
  double duration = 10;
  uint64_t count = 0;  // measured operations in all; 0: run for `duration`
  double warmup = -1;  // seconds; default 2 with a duration, 0 with a count
  int containers = 1;
  int64_t objects = -1;  // population for reads; default 4 per client
  std::vector<Endpoint> endpoints;
  std::string prefix = "bench";
  std::string json_path;
  bool verify_body = true;
  std::string label;
  uint64_t slo_segment = 0;  // bytes per SLO segment; 0: plain objects
  bool s3 = false;           // --api s3: the S3 API (path-style, SigV4 header auth)
};

// ---- parsing ---------------------------------------------------------------------------------

std::optional<uint64_t> parse_size(std::string s) {
  static const std::vector<std::pair<std::string, uint64_t>> units = {
      {"gib", 1ULL << 30}, {"mib", 1ULL << 20}, {"kib", 1ULL << 10}, {"gb", 1000000000ULL},
      {"mb", 1000000ULL},  {"kb", 1000ULL},     {"g", 1ULL << 30},   {"m", 1ULL << 20},
      {"k", 1ULL << 10},   {"b", 1}};
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  uint64_t mult = 1;
  for (const auto& [suffix, m] : units) {
    if (s.size() > suffix.size() && s.ends_with(suffix)) {
      mult = m;
      s.resize(s.size() - suffix.size());
      break;
    }
  }
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end || v < 0) return std::nullopt;
  return static_cast<uint64_t>(v * static_cast<double>(mult));
}

std::optional<Op> parse_op(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (s == kOpNames[i]) return static_cast<Op>(i);
  }
  return std::nullopt;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::optional<Endpoint> parse_endpoint(const std::string& s) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  int port = std::atoi(s.c_str() + colon + 1);
  if (port <= 0 || port > 65535) return std::nullopt;
  return Endpoint{s.substr(0, colon), static_cast<uint16_t>(port)};
}

// "http://host:port/path" -> endpoint and path.
bool parse_url(const std::string& url, Endpoint* ep, std::string* path) {
  if (!url.starts_with("http://")) return false;
  size_t slash = url.find('/', 7);
  std::string hostport = url.substr(7, slash == std::string::npos ? std::string::npos : slash - 7);
  auto e = parse_endpoint(hostport.find(':') == std::string::npos ? hostport + ":80" : hostport);
  if (!e) return false;
  *ep = *e;
  *path = slash == std::string::npos ? "/" : url.substr(slash);
  return true;
}

std::string parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return "missing value for " + a;
    std::string v = argv[++i];
    if (a == "--auth") {
      o.auth_url = v;
    } else if (a == "--user") {
      o.user = v;
    } else if (a == "--key") {
      o.key = v;
    } else if (a == "--workload") {
      o.workload = v;
    } else if (a == "--mix") {
      for (const auto& part : split(v, ',')) {
        size_t eq = part.find('=');
        auto op = parse_op(part.substr(0, eq));
        if (eq == std::string::npos || !op) return "bad --mix part: " + part;
        o.mix.emplace_back(*op, std::atof(part.c_str() + eq + 1));
      }
    } else if (a == "--size" || a == "--sizes") {
      o.sizes.clear();
      for (const auto& part : split(v, ',')) {
        size_t colon = part.find(':');
        auto size = parse_size(part.substr(0, colon));
        if (!size) return "bad size: " + part;
        o.sizes.emplace_back(*size, colon == std::string::npos ? 1 : std::atof(part.c_str() + colon + 1));
      }
    } else if (a == "--concurrency") {
      o.concurrency = std::atoi(v.c_str());
    } else if (a == "--threads") {
      o.threads = std::atoi(v.c_str());
    } else if (a == "--duration") {
      o.duration = std::atof(v.c_str());
    } else if (a == "--count") {
      o.count = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--warmup") {
      o.warmup = std::atof(v.c_str());
    } else if (a == "--containers") {
      o.containers = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--objects") {
      o.objects = std::atoll(v.c_str());
    } else if (a == "--endpoints") {
      for (const auto& part : split(v, ',')) {
        auto e = parse_endpoint(part);
        if (!e) return "bad endpoint: " + part;
        o.endpoints.push_back(*e);
      }
    } else if (a == "--prefix") {
      o.prefix = v;
    } else if (a == "--json") {
      o.json_path = v;
    } else if (a == "--verify") {
      if (v != "full" && v != "headers") return "--verify is full or headers";
      o.verify_body = v == "full";
    } else if (a == "--label") {
      o.label = v;
    } else if (a == "--api") {
      if (v != "swift" && v != "s3") return "--api is swift or s3";
      o.s3 = v == "s3";
    } else if (a == "--slo-segment") {
      auto size = parse_size(v);
      if (!size || *size == 0) return "bad --slo-segment: " + v;
      o.slo_segment = *size;
    } else {
      return "unknown option " + a;
    }
  }
  if (o.auth_url.empty()) return "--auth is required";
  if (o.concurrency < 1 || o.threads < 1) return "--concurrency and --threads must be positive";
  if (o.mix.empty()) {
    if (o.workload == "mixed") {
      o.mix = {{Op::kGet, 80}, {Op::kPut, 20}};
    } else if (auto op = parse_op(o.workload == "list" ? "LIST" : o.workload)) {
      o.mix = {{*op, 1}};
    } else {
      return "unknown workload " + o.workload;
    }
  }
  if (o.warmup < 0) o.warmup = o.count ? 0 : 2;
  // An SLO's body is its segments' bodies one after another, each from its own variant: the
  // client checks the manifest's ETag and the length, not an MD5 of the whole.
  if (o.slo_segment && o.verify_body) return "--slo-segment needs --verify headers";
  if (o.s3 && o.slo_segment) return "--api s3 takes no --slo-segment";
  if (o.s3 && std::any_of(o.mix.begin(), o.mix.end(),
                          [](const auto& m) { return m.first == Op::kPost; })) {
    return "--api s3 has no POST workload";
  }
  return {};
}

// ---- bodies ----------------------------------------------------------------------------------

// Object bodies without storing them: a fixed random block, read from an offset that depends
// on the object and its version, so objects differ and a stale answer cannot pass for a fresh
// one.
class BodySource {
 public:
  BodySource() : block_(1 << 20) {
    std::mt19937_64 rng(42);
    for (auto& b : block_) b = static_cast<char>(rng());
  }
  // Bytes [pos, pos + n) of body `seed`, n <= kChunk, into out.
  void fill(uint64_t seed, uint64_t pos, size_t n, char* out) const {
    size_t at = static_cast<size_t>((seed * 7919 + pos) % block_.size());
    size_t done = 0;
    while (done < n) {
      size_t take = std::min(n - done, block_.size() - at);
      std::memcpy(out + done, block_.data() + at, take);
      done += take;
      at = 0;
    }
  }

 private:
  std::vector<char> block_;
};

// ---- results ---------------------------------------------------------------------------------

struct OpStats {
  std::vector<double> latencies;  // seconds, successful operations in the window
  uint64_t bytes = 0;             // body bytes sent or received by them
  std::map<std::string, uint64_t> errors;  // cause ("503", "etag mismatch", ...) -> count
};

struct Second {
  uint64_t ops = 0, errors = 0, bytes = 0;
};

struct ClientStats {
  std::array<OpStats, kOpNames.size()> ops;
  std::vector<Second> timeline;
  double setup_s = 0;
  std::string setup_error;
};

// ---- one HTTP exchange -----------------------------------------------------------------------

struct Answer {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  uint64_t body_bytes = 0;
  std::string body_md5;   // when asked for
  std::string body;       // kept only when asked for (small bodies)
  std::string error;      // transport trouble or a malformed answer
};

class Connection {
 public:
  Connection(net::any_io_executor ex, Endpoint ep) : ex_(ex), ep_(std::move(ep)) {}

  // Sends `method target` with `headers` and a body of `length` bytes from `body` (seed), reads
  // the answer. `md5_out` gets the MD5 of the body sent.
  net::awaitable<Answer> exchange(const std::string& method, const std::string& target,
                                  const std::string& headers, const BodySource* body,
                                  uint64_t seed, uint64_t length, std::string* md5_out,
                                  bool hash_answer, bool keep_answer,
                                  std::string_view text_body = {}) {
    Answer a;
    for (int attempt = 0; attempt < 2; ++attempt) {
      bool fresh = !sock_;
      if (!sock_) {
        sock_.emplace(ex_);
        buf_.consume(buf_.size());
        auto [ec] = co_await sock_->async_connect(
            tcp::endpoint(net::ip::make_address(ep_.host), ep_.port), kTuple);
        if (ec) {
          sock_.reset();
          a.error = "connect";
          co_return a;
        }
        sock_->set_option(tcp::no_delay(true));
      }
      a = co_await once(method, target, headers, body, seed, length, md5_out, hash_answer,
                        keep_answer, text_body);
      // A kept-alive connection the server closed meanwhile: once more on a new one.
      if (a.error.empty() || fresh || a.status != 0) break;
      sock_.reset();
    }
    if (!a.error.empty()) sock_.reset();
    co_return a;
  }

 private:
  net::awaitable<Answer> once(const std::string& method, const std::string& target,
                              const std::string& headers, const BodySource* body, uint64_t seed,
                              uint64_t length, std::string* md5_out, bool hash_answer,
                              bool keep_answer, std::string_view text_body) {
    Answer a;
    std::string head = method + " " + target + " HTTP/1.1\r\nHost: " + ep_.host + "\r\n" + headers;
    if (body) head += "Content-Length: " + std::to_string(length) + "\r\n";
    if (!body && !text_body.empty()) {
      head += "Content-Length: " + std::to_string(text_body.size()) + "\r\n";
    }
    head += "\r\n";
    if (!body) head += text_body;
    auto [ec, n] = co_await net::async_write(*sock_, net::buffer(head), kTuple);
    if (ec) {
      a.error = "write";
      co_return a;
    }
    if (body) {
      apus::common::crypto::Md5 md5;
      std::vector<char> chunk(std::min<uint64_t>(kChunk, std::max<uint64_t>(length, 1)));
      for (uint64_t pos = 0; pos < length;) {
        size_t take = static_cast<size_t>(std::min<uint64_t>(chunk.size(), length - pos));
        body->fill(seed, pos, take, chunk.data());
        if (md5_out) md5.update(std::string_view(chunk.data(), take));
        auto [wec, wn] = co_await net::async_write(*sock_, net::buffer(chunk.data(), take), kTuple);
        if (wec) {
          a.error = "write";
          co_return a;
        }
        pos += take;
      }
      if (md5_out) *md5_out = md5.hex_digest();
    }
    auto [rec, hn] = co_await net::async_read_until(*sock_, buf_, "\r\n\r\n", kTuple);
    if (rec) {
      a.error = "read";
      co_return a;
    }
    std::string text(static_cast<const char*>(buf_.data().data()), hn);
    buf_.consume(hn);
    if (text.size() < 12 || !text.starts_with("HTTP/1.")) {
      a.error = "bad answer";
      co_return a;
    }
    a.status = std::atoi(text.c_str() + 9);
    for (const auto& line : split(text.substr(text.find("\r\n") + 2), '\n')) {
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
      while (!value.empty() && (value.back() == '\r' || value.back() == ' ')) value.pop_back();
      a.headers[name] = value;
    }
    bool no_body = method == "HEAD" || a.status == 204 || a.status == 304 || a.status < 200;
    if (no_body) co_return a;
    if (a.headers.count("transfer-encoding")) {
      a.error = "chunked answer";  // Swift's servers give lengths for everything we ask
      co_return a;
    }
    auto cl = a.headers.find("content-length");
    if (cl == a.headers.end()) {
      a.error = "no content-length";
      co_return a;
    }
    uint64_t want = std::strtoull(cl->second.c_str(), nullptr, 10);
    apus::common::crypto::Md5 md5;
    std::vector<char> chunk(kChunk);
    while (a.body_bytes < want) {
      if (buf_.size() == 0) {
        auto [bec, bn] = co_await sock_->async_read_some(
            buf_.prepare(static_cast<size_t>(std::min<uint64_t>(kChunk, want - a.body_bytes))),
            kTuple);
        if (bec) {
          a.error = "short body";
          co_return a;
        }
        buf_.commit(bn);
      }
      size_t take = static_cast<size_t>(std::min<uint64_t>(buf_.size(), want - a.body_bytes));
      std::string_view piece(static_cast<const char*>(buf_.data().data()), take);
      if (hash_answer) md5.update(piece);
      if (keep_answer) a.body.append(piece);
      buf_.consume(take);
      a.body_bytes += take;
    }
    if (hash_answer) a.body_md5 = md5.hex_digest();
    auto conn = a.headers.find("connection");
    if (conn != a.headers.end() && conn->second == "close") sock_.reset();
    co_return a;
  }

  net::any_io_executor ex_;
  Endpoint ep_;
  std::optional<tcp::socket> sock_;
  net::streambuf buf_;
};

// ---- S3 (--api s3) ----------------------------------------------------------------------------

// Version 4 header signatures with UNSIGNED-PAYLOAD (as SDKs sign over TLS): the server does the
// HMAC work an S3 request costs, and no body hashing, which the Swift API has no counterpart of.
// The signing key is derived once a day. Thread-compatible: one per client.
class S3Signer {
 public:
  S3Signer(std::string access_key, std::string secret)
      : access_key_(std::move(access_key)), secret_(std::move(secret)) {}

  // The header lines that sign `method` of `target` ("/bucket/key[?query]", as sent) to `host`.
  std::string headers(const std::string& method, const std::string& target,
                      const std::string& host) {
    namespace crypto = apus::common::crypto;
    char stamp[32];
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    const std::string date(stamp, 8);
    if (date != day_) {
      day_ = date;
      key_ = crypto::hmac_bytes("sha256", "AWS4" + secret_, date);
      for (const char* part : {"us-east-1", "s3", "aws4_request"}) {
        key_ = crypto::hmac_bytes("sha256", key_, part);
      }
    }
    const size_t q = target.find('?');
    const std::string path = target.substr(0, q);
    const std::string query = q == std::string::npos ? "" : target.substr(q + 1);  // one field
    const std::string canonical = method + "\n" + path + "\n" + query + "\nhost:" + host +
                                  "\nx-amz-content-sha256:UNSIGNED-PAYLOAD\nx-amz-date:" + stamp +
                                  "\n\nhost;x-amz-content-sha256;x-amz-date\nUNSIGNED-PAYLOAD";
    const std::string scope = date + "/us-east-1/s3/aws4_request";
    const std::string to_sign = std::string("AWS4-HMAC-SHA256\n") + stamp + "\n" + scope + "\n" +
                                crypto::sha256_hex(canonical);
    return "Authorization: AWS4-HMAC-SHA256 Credential=" + access_key_ + "/" + scope +
           ", SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" +
           crypto::hmac_hex("sha256", key_, to_sign) +
           "\r\nx-amz-content-sha256: UNSIGNED-PAYLOAD\r\nx-amz-date: " + stamp + "\r\n";
  }

 private:
  std::string access_key_, secret_;
  std::string day_, key_;
};

// ---- the run ---------------------------------------------------------------------------------

struct Plan {
  Options opt;
  std::string account_path;  // "/v1/AUTH_test", percent-encoded as the server gave it
  std::string token;
  BodySource bodies;
  Clock::time_point measure_from, end;  // set when the setup is done
  std::atomic<uint64_t> measured{0};    // operations counted so far (for --count)
  std::atomic<int> setup_left{0};
};

std::string container_name(const Options& o, uint64_t object) {
  return o.prefix + "-c" + std::to_string(object % static_cast<uint64_t>(o.containers));
}

// One client: its connection, its objects and what it measured.
struct Client {
  int index = 0;
  Endpoint endpoint;
  uint64_t first_object = 0, object_count = 0;
  struct Object {
    uint64_t size = 0;
    uint64_t version = 0;  // bumps on every PUT, so the body (and ETag) changes
    std::string etag;
    bool exists = false;
  };
  std::vector<Object> objects;
  std::map<std::pair<uint64_t, uint64_t>, std::string> variant_md5;  // (seed, size) -> MD5
  std::mt19937_64 rng;
  ClientStats stats;
  std::optional<S3Signer> s3;  // --api s3
};

// The headers that authenticate `method` of `target` for client c: the Swift token, or an S3
// signature.
std::string auth_headers(const Plan& p, Client& c, const std::string& method,
                         const std::string& target) {
  if (!p.opt.s3) return "X-Auth-Token: " + p.token + "\r\n";
  if (!c.s3) c.s3.emplace(p.opt.user, p.opt.key);
  return c.s3->headers(method, target, c.endpoint.host);
}

// With --verify headers, bodies come in a few variants whose MD5 each client computes once,
// so large PUTs cost the client no hashing (a stale read still shows: the variant changes
// with every version). With --verify full every version has its own body, hashed as it goes.
constexpr uint64_t kVariants = 16;

// One of `choices` (value, weight), drawn in proportion to the weights.
template <class T>
T pick_weighted(const std::vector<std::pair<T, double>>& choices, std::mt19937_64& rng) {
  double total = 0;
  for (const auto& [value, w] : choices) total += w;
  double x = std::uniform_real_distribution<double>(0, total)(rng);
  for (const auto& [value, w] : choices) {
    if (x < w) return value;
    x -= w;
  }
  return choices.back().first;
}

uint64_t pick_size(const Options& o, std::mt19937_64& rng) { return pick_weighted(o.sizes, rng); }
Op pick_op(const Options& o, std::mt19937_64& rng) { return pick_weighted(o.mix, rng); }

// An object's path: below the account (Swift), or /<bucket>/<key> (S3, path-style).
std::string object_path(const Plan& p, uint64_t i) {
  return (p.opt.s3 ? "" : p.account_path) + "/" + container_name(p.opt, i) + "/o" +
         std::to_string(i);
}

// The MD5 of body variant `seed` cut to `size` bytes (computed once per client).
const std::string& variant_md5(const Plan& p, Client& c, uint64_t seed, uint64_t size) {
  auto [it, fresh] = c.variant_md5.try_emplace({seed, size});
  if (fresh) {
    apus::common::crypto::Md5 h;
    std::vector<char> chunk(kChunk);
    for (uint64_t pos = 0; pos < size; pos += kChunk) {
      size_t take = static_cast<size_t>(std::min<uint64_t>(kChunk, size - pos));
      p.bodies.fill(seed, pos, take, chunk.data());
      h.update(std::string_view(chunk.data(), take));
    }
    it->second = h.hex_digest();
  }
  return it->second;
}

std::string unquoted_etag(Answer& a) {
  std::string etag = a.headers["etag"];
  etag.erase(std::remove(etag.begin(), etag.end(), '"'), etag.end());
  return etag;
}

// PUTs `size` bytes of body `seed` to `path` and checks the ETag answered against the MD5
// (`md5` when already known, else computed while sending, and returned there).
net::awaitable<std::string> put_body(Plan& p, Client& c, Connection& conn,
                                     const std::string& path, uint64_t seed, uint64_t size,
                                     std::string& md5) {
  const bool known = !md5.empty();
  Answer a = co_await conn.exchange(
      "PUT", path, auth_headers(p, c, "PUT", path) + "Content-Type: application/octet-stream\r\n",
      &p.bodies, seed, size, known ? nullptr : &md5, false, false);
  if (!a.error.empty() || a.status != (p.opt.s3 ? 200 : 201)) {
    co_return a.error.empty() ? std::to_string(a.status) : a.error;
  }
  if (unquoted_etag(a) != md5) co_return "etag mismatch";
  co_return "";
}

// The SLO form of put_object(): segments of --slo-segment bytes, then the manifest. The
// manifest's ETag (what a GET must answer) is what its PUT answered.
net::awaitable<std::string> put_slo(Plan& p, Client& c, Connection& conn, size_t k,
                                    uint64_t version, uint64_t size) {
  const uint64_t id = c.first_object + k;
  const std::string name = container_name(p.opt, id) + "/o" + std::to_string(id);
  std::string manifest = "[";
  uint64_t n = 0;
  for (uint64_t pos = 0; pos < size || n == 0; pos += p.opt.slo_segment, ++n) {
    const uint64_t len = std::min(p.opt.slo_segment, size - pos);
    const uint64_t seed = (version * 131 + n) % kVariants;
    std::string md5 = variant_md5(p, c, seed, len);
    const std::string segment = name + "_seg/" + std::to_string(n);
    std::string error =
        co_await put_body(p, c, conn, p.account_path + "/" + segment, seed, len, md5);
    if (!error.empty()) co_return "segment " + error;
    manifest += std::string(n ? "," : "") + "{\"path\": \"/" + segment + "\", \"etag\": \"" +
                md5 + "\", \"size_bytes\": " + std::to_string(len) + "}";
  }
  manifest += "]";
  Answer a = co_await conn.exchange("PUT", object_path(p, id) + "?multipart-manifest=put",
                                    "X-Auth-Token: " + p.token + "\r\n", nullptr, 0, 0, nullptr,
                                    false, false, manifest);
  if (!a.error.empty() || a.status != 201) {
    co_return "manifest " + (a.error.empty() ? std::to_string(a.status) : a.error);
  }
  c.objects[k] = Client::Object{size, version, unquoted_etag(a), true};
  co_return "";
}

// PUTs version `version` of the client's object k with `size` bytes and checks the ETag the
// server answers; records the object on success. The error cause, or "".
net::awaitable<std::string> put_object(Plan& p, Client& c, Connection& conn, size_t k,
                                       uint64_t version, uint64_t size) {
  if (p.opt.slo_segment) co_return co_await put_slo(p, c, conn, k, version, size);
  const uint64_t id = c.first_object + k;
  uint64_t seed = id * 1000003 + version;
  std::string md5;
  if (!p.opt.verify_body) {
    seed = version % kVariants;
    md5 = variant_md5(p, c, seed, size);
  }
  std::string error = co_await put_body(p, c, conn, object_path(p, id), seed, size, md5);
  if (!error.empty()) co_return error;
  c.objects[k] = Client::Object{size, version, md5, true};
  co_return "";
}

// Does one operation; returns the error cause, or "" on success (with the bytes it moved).
net::awaitable<std::string> run_op(Plan& p, Client& c, Connection& conn, Op op, uint64_t* bytes) {
  *bytes = 0;
  auto status_error = [](const Answer& a) {
    return a.error.empty() ? std::to_string(a.status) : a.error;
  };
  if (op == Op::kList) {
    uint64_t i = c.first_object + c.rng() % std::max<uint64_t>(1, c.object_count);
    const std::string target =
        p.opt.s3 ? "/" + container_name(p.opt, i) + "?max-keys=100"
                 : p.account_path + "/" + container_name(p.opt, i) + "?format=json&limit=100";
    Answer a = co_await conn.exchange("GET", target, auth_headers(p, c, "GET", target), nullptr,
                                      0, 0, nullptr, false, false);
    if (!a.error.empty() || a.status != 200) co_return status_error(a);
    *bytes = a.body_bytes;
    co_return "";
  }
  if (c.objects.empty()) co_return "no objects";
  size_t k = static_cast<size_t>(c.rng() % c.objects.size());
  Client::Object& obj = c.objects[k];
  if (op == Op::kPut) {
    uint64_t size = pick_size(p.opt, c.rng);
    std::string error = co_await put_object(p, c, conn, k, obj.version + 1, size);
    if (error.empty()) *bytes = size;
    co_return error;
  }
  // The other operations need the object to be there (DELETE takes it away).
  if (!obj.exists) {
    auto it = std::find_if(c.objects.begin(), c.objects.end(),
                           [](const Client::Object& o) { return o.exists; });
    if (it == c.objects.end()) co_return "no objects";
    k = static_cast<size_t>(it - c.objects.begin());
  }
  Client::Object& target = c.objects[k];
  const std::string tpath = object_path(p, c.first_object + k);
  if (op == Op::kGet || op == Op::kHead) {
    bool get = op == Op::kGet;
    const std::string method = get ? "GET" : "HEAD";
    Answer a = co_await conn.exchange(method, tpath, auth_headers(p, c, method, tpath), nullptr,
                                      0, 0, nullptr, get && p.opt.verify_body, false);
    if (!a.error.empty() || a.status != 200) co_return status_error(a);
    std::string etag = a.headers["etag"];
    etag.erase(std::remove(etag.begin(), etag.end(), '"'), etag.end());
    if (etag != target.etag) co_return "etag mismatch";
    uint64_t length = std::strtoull(a.headers["content-length"].c_str(), nullptr, 10);
    if (length != target.size || (get && a.body_bytes != target.size)) co_return "size mismatch";
    if (get && p.opt.verify_body && a.body_md5 != target.etag) co_return "body mismatch";
    *bytes = a.body_bytes;
    co_return "";
  }
  if (op == Op::kPost) {
    Answer a = co_await conn.exchange("POST", tpath,
                                      auth_headers(p, c, "POST", tpath) +
                                          "X-Object-Meta-Bench: 1\r\n",
                                      nullptr, 0, 0, nullptr, false, false);
    if (!a.error.empty() || a.status != 202) co_return status_error(a);
    co_return "";
  }
  Answer a = co_await conn.exchange("DELETE", tpath, auth_headers(p, c, "DELETE", tpath), nullptr,
                                    0, 0, nullptr, false, false);
  if (!a.error.empty() || a.status != 204) co_return status_error(a);
  target.exists = false;
  co_return "";
}

// Every workload but pure PUTs reads objects, or lists containers that should hold some.
bool needs_population(const Options& o) {
  return std::any_of(o.mix.begin(), o.mix.end(), [](const auto& m) { return m.first != Op::kPut; });
}

net::awaitable<void> client_main(Plan& p, Client& c) {
  auto ex = co_await net::this_coro::executor;
  Connection conn(ex, c.endpoint);
  // Setup: this client's objects (when the workload reads them), outside the measurement.
  auto setup_start = Clock::now();
  if (needs_population(p.opt)) {
    for (size_t k = 0; k < c.objects.size(); ++k) {
      std::string error = co_await put_object(p, c, conn, k, 1, pick_size(p.opt, c.rng));
      if (!error.empty()) {
        c.stats.setup_error = "setup PUT failed: " + error;
        break;
      }
    }
  }
  c.stats.setup_s = std::chrono::duration<double>(Clock::now() - setup_start).count();
  // Wait for every client's setup, then the clock starts for all at once.
  if (--p.setup_left == 0) {
    p.measure_from = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(p.opt.warmup));
    p.end = p.opt.count ? Clock::time_point::max()
                        : p.measure_from + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(p.opt.duration));
  }
  net::steady_timer t(ex);
  while (p.setup_left.load() > 0) {
    t.expires_after(std::chrono::milliseconds(5));
    co_await t.async_wait(kTuple);
  }
  for (;;) {
    auto start = Clock::now();
    if (start >= p.end) break;
    const bool counted = start >= p.measure_from;
    if (counted && p.opt.count && p.measured.fetch_add(1) >= p.opt.count) break;
    Op op = pick_op(p.opt, c.rng);
    uint64_t bytes = 0;
    std::string error = co_await run_op(p, c, conn, op, &bytes);
    if (error == "no objects") break;  // a DELETE run that deleted everything it had
    auto now = Clock::now();
    if (!counted) continue;
    OpStats& s = c.stats.ops[static_cast<size_t>(op)];
    size_t second = static_cast<size_t>(std::chrono::duration<double>(now - p.measure_from).count());
    if (c.stats.timeline.size() <= second) c.stats.timeline.resize(second + 1);
    if (error.empty()) {
      s.latencies.push_back(std::chrono::duration<double>(now - start).count());
      s.bytes += bytes;
      ++c.stats.timeline[second].ops;
      c.stats.timeline[second].bytes += bytes;
    } else {
      ++s.errors[error];
      ++c.stats.timeline[second].errors;
    }
  }
}

// ---- setup outside the clients -----------------------------------------------------------------

// A blocking exchange for the few requests before the run (auth, containers).
Answer plain_request(const Endpoint& ep, const std::string& method, const std::string& target,
                     const std::string& headers) {
  net::io_context ioc;
  Answer out;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        Connection c(co_await net::this_coro::executor, ep);
        out = co_await c.exchange(method, target, headers, nullptr, 0, 0, nullptr, false, true);
      },
      net::detached);
  ioc.run();
  return out;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size()))) ;
  return sorted[std::min(sorted.size() - 1, i == 0 ? 0 : i - 1)];
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Summary of one set of operations, as JSON and as a table row.
struct Summary {
  uint64_t ops = 0, bytes = 0, errors = 0;
  std::map<std::string, uint64_t> errors_by_cause;
  std::vector<double> sorted;
  double mean = 0;
};

Summary summarize(const std::vector<const OpStats*>& parts) {
  Summary s;
  for (const OpStats* p : parts) {
    s.sorted.insert(s.sorted.end(), p->latencies.begin(), p->latencies.end());
    s.bytes += p->bytes;
    for (const auto& [cause, n] : p->errors) {
      s.errors_by_cause[cause] += n;
      s.errors += n;
    }
  }
  std::sort(s.sorted.begin(), s.sorted.end());
  s.ops = s.sorted.size();
  double sum = 0;
  for (double v : s.sorted) sum += v;
  s.mean = s.ops ? sum / static_cast<double>(s.ops) : 0;
  return s;
}

std::string summary_json(const Summary& s, double window) {
  std::string errors = "{";
  for (const auto& [cause, n] : s.errors_by_cause) {
    if (errors.size() > 1) errors += ", ";
    errors += json_string(cause) + ": " + std::to_string(n);
  }
  errors += "}";
  return "{\"ops\": " + std::to_string(s.ops) + ", \"ops_per_s\": " +
         num(static_cast<double>(s.ops) / window) + ", \"bytes\": " + std::to_string(s.bytes) +
         ", \"mib_per_s\": " + num(static_cast<double>(s.bytes) / window / (1 << 20)) +
         ", \"errors\": " + std::to_string(s.errors) + ", \"errors_by_cause\": " + errors +
         ", \"latency_ms\": {\"mean\": " + num(s.mean * 1e3) + ", \"p50\": " +
         num(percentile(s.sorted, 0.5) * 1e3) + ", \"p90\": " + num(percentile(s.sorted, 0.9) * 1e3) +
         ", \"p99\": " + num(percentile(s.sorted, 0.99) * 1e3) + ", \"p99_9\": " +
         num(percentile(s.sorted, 0.999) * 1e3) + ", \"max\": " +
         num(s.sorted.empty() ? 0 : s.sorted.back() * 1e3) + "}}";
}

}  // namespace

int main(int argc, char** argv) {
  Plan p;
  if (std::string err = parse_args(argc, argv, p.opt); !err.empty()) {
    std::fprintf(stderr, "apus-bench: %s\n(see the comment at the top of bench/apus_bench.cpp)\n",
                 err.c_str());
    return 2;
  }
  Options& o = p.opt;
  auto t_start = Clock::now();
  double cpu0 = cpu_seconds();

  // Auth: tempauth v1.0 gives the storage URL and a token.
  Endpoint auth_ep;
  std::string auth_path;
  if (!parse_url(o.auth_url, &auth_ep, &auth_path)) {
    std::fprintf(stderr, "apus-bench: --auth must be http://host:port/path\n");
    return 2;
  }
  Answer auth = plain_request(auth_ep, "GET", auth_path,
                              "X-Auth-User: " + o.user + "\r\nX-Auth-Key: " + o.key + "\r\n");
  Endpoint storage_ep;
  if (!auth.error.empty() || auth.status / 100 != 2 || auth.headers["x-auth-token"].empty() ||
      !parse_url(auth.headers["x-storage-url"], &storage_ep, &p.account_path)) {
    std::fprintf(stderr, "apus-bench: auth at %s failed: %s\n", o.auth_url.c_str(),
                 auth.error.empty() ? std::to_string(auth.status).c_str() : auth.error.c_str());
    return 1;
  }
  p.token = auth.headers["x-auth-token"];
  // The storage URL names the cluster's public address; direct runs use --endpoints instead.
  if (o.endpoints.empty()) o.endpoints.push_back(auth_ep);
  double auth_s = std::chrono::duration<double>(Clock::now() - t_start).count();

  auto setup_start = Clock::now();
  for (int k = 0; k < o.containers; ++k) {
    Answer a = plain_request(o.endpoints[0], "PUT",
                             p.account_path + "/" + o.prefix + "-c" + std::to_string(k),
                             "X-Auth-Token: " + p.token + "\r\nContent-Length: 0\r\n");
    if (!a.error.empty() || a.status / 100 != 2) {
      std::fprintf(stderr, "apus-bench: container PUT failed: %s\n",
                   a.error.empty() ? std::to_string(a.status).c_str() : a.error.c_str());
      return 1;
    }
  }

  const uint64_t population =
      o.objects >= 0 ? static_cast<uint64_t>(o.objects) : 4 * static_cast<uint64_t>(o.concurrency);
  std::vector<Client> clients(o.concurrency);
  uint64_t per_client = std::max<uint64_t>(1, (population + o.concurrency - 1) / o.concurrency);
  for (int i = 0; i < o.concurrency; ++i) {
    Client& c = clients[i];
    c.index = i;
    c.endpoint = o.endpoints[i % o.endpoints.size()];
    c.first_object = static_cast<uint64_t>(i) * per_client;
    c.object_count = per_client;
    c.objects.resize(per_client);
    c.rng.seed(1000 + i);
  }
  p.setup_left = o.concurrency;
  std::vector<std::unique_ptr<net::io_context>> loops;
  for (int t = 0; t < o.threads; ++t) loops.push_back(std::make_unique<net::io_context>(1));
  for (int i = 0; i < o.concurrency; ++i) {
    net::co_spawn(*loops[i % o.threads], client_main(p, clients[i]), net::detached);
  }
  std::vector<std::thread> threads;
  for (auto& l : loops) threads.emplace_back([&l] { l->run(); });
  for (auto& t : threads) t.join();
  auto t_end = Clock::now();
  double cpu = cpu_seconds() - cpu0;

  for (const auto& c : clients) {
    if (!c.stats.setup_error.empty()) {
      std::fprintf(stderr, "apus-bench: client %d: %s\n", c.index, c.stats.setup_error.c_str());
      return 1;
    }
  }
  double setup_s = std::chrono::duration<double>(p.measure_from - setup_start).count() - o.warmup;
  double window = std::chrono::duration<double>(t_end - p.measure_from).count();
  if (!o.count) window = std::min(window, o.duration);
  window = std::max(window, 1e-9);

  // Merge.
  std::vector<const OpStats*> all;
  std::string by_op = "{";
  std::string table;
  char line[256];
  std::snprintf(line, sizeof line, "%-7s %9s %10s %9s %9s %9s %9s %9s %9s %7s\n", "op", "ops",
                "ops/s", "MiB/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "errors");
  table += line;
  auto row = [&](const char* name, const Summary& s) {
    std::snprintf(line, sizeof line, "%-7s %9lu %10.1f %9.2f %9.3f %9.3f %9.3f %9.3f %9.3f %7lu\n",
                  name, static_cast<unsigned long>(s.ops), static_cast<double>(s.ops) / window,
                  static_cast<double>(s.bytes) / window / (1 << 20),
                  percentile(s.sorted, 0.5) * 1e3, percentile(s.sorted, 0.9) * 1e3,
                  percentile(s.sorted, 0.99) * 1e3, percentile(s.sorted, 0.999) * 1e3,
                  s.sorted.empty() ? 0.0 : s.sorted.back() * 1e3,
                  static_cast<unsigned long>(s.errors));
    table += line;
  };
  for (size_t op = 0; op < kOpNames.size(); ++op) {
    std::vector<const OpStats*> parts;
    for (const auto& c : clients) parts.push_back(&c.stats.ops[op]);
    Summary s = summarize(parts);
    if (s.ops == 0 && s.errors == 0) continue;
    all.insert(all.end(), parts.begin(), parts.end());
    if (by_op.size() > 1) by_op += ", ";
    by_op += json_string(kOpNames[op]) + ": " + summary_json(s, window);
    row(kOpNames[op], s);
  }
  by_op += "}";
  Summary total = summarize(all);
  row("all", total);
  std::vector<Second> timeline;
  for (const auto& c : clients) {
    if (timeline.size() < c.stats.timeline.size()) timeline.resize(c.stats.timeline.size());
    for (size_t i = 0; i < c.stats.timeline.size(); ++i) {
      timeline[i].ops += c.stats.timeline[i].ops;
      timeline[i].errors += c.stats.timeline[i].errors;
      timeline[i].bytes += c.stats.timeline[i].bytes;
    }
  }
  std::string timeline_json = "[";
  for (size_t i = 0; i < timeline.size(); ++i) {
    if (i) timeline_json += ", ";
    timeline_json += "{\"second\": " + std::to_string(i) + ", \"ops\": " +
                     std::to_string(timeline[i].ops) + ", \"errors\": " +
                     std::to_string(timeline[i].errors) + ", \"bytes\": " +
                     std::to_string(timeline[i].bytes) + "}";
  }
  timeline_json += "]";
  const double littles = total.mean * static_cast<double>(total.ops) / window;
  const double total_s = std::chrono::duration<double>(t_end - t_start).count();

  std::string sizes = "[";
  for (const auto& [size, w] : o.sizes) {
    if (sizes.size() > 1) sizes += ", ";
    sizes += "[" + std::to_string(size) + ", " + num(w) + "]";
  }
  sizes += "]";
  std::string mix = "{";
  for (const auto& [op, w] : o.mix) {
    if (mix.size() > 1) mix += ", ";
    mix += json_string(kOpNames[static_cast<size_t>(op)]) + ": " + num(w);
  }
  mix += "}";
  std::string endpoints = "[";
  for (const auto& e : o.endpoints) {
    if (endpoints.size() > 1) endpoints += ", ";
    endpoints += json_string(e.host + ":" + std::to_string(e.port));
  }
  endpoints += "]";
  std::string json =
      "{\"tool\": \"apus-bench\", \"label\": " + json_string(o.label) +
      ", \"config\": {\"auth\": " + json_string(o.auth_url) + ", \"workload\": " +
      json_string(o.workload) + ", \"mix\": " + mix + ", \"sizes\": " + sizes +
      ", \"concurrency\": " + std::to_string(o.concurrency) + ", \"threads\": " +
      std::to_string(o.threads) + ", \"duration_s\": " + num(o.duration) + ", \"count\": " +
      std::to_string(o.count) + ", \"containers\": " + std::to_string(o.containers) +
      ", \"objects\": " + std::to_string(needs_population(o) ? per_client * o.concurrency : 0) +
      ", \"endpoints\": " + endpoints + ", \"verify\": " +
      json_string(o.verify_body ? "full" : "headers") + "}, \"wall_clock_s\": {\"auth\": " +
      num(auth_s) + ", \"setup\": " + num(setup_s) + ", \"warmup\": " + num(o.warmup) +
      ", \"window\": " + num(window) + ", \"total\": " + num(total_s) + "}, \"totals\": " +
      summary_json(total, window) + ", \"by_op\": " + by_op +
      ", \"littles_law_concurrency\": " + num(littles) + ", \"client_cpu_s\": " + num(cpu) +
      ", \"client_cpu_per_op_ms\": " +
      num(total.ops ? cpu / static_cast<double>(total.ops) * 1e3 : 0) +
      ", \"timeline\": " + timeline_json + "}\n";

  std::printf("%s", table.c_str());
  std::printf("wall clock %.2f s = auth %.3f + setup %.2f + warm-up %.2f + window %.2f; "
              "Little's law: %.1f of %d clients busy; client CPU %.2f s\n",
              total_s, auth_s, setup_s, o.warmup, window, littles, o.concurrency, cpu);
  if (o.json_path == "-") {
    std::printf("%s", json.c_str());
  } else if (!o.json_path.empty()) {
    std::ofstream(o.json_path) << json;
  }
  return total.errors > 0 ? 3 : 0;
}
