// cname_lookup (limits.h): a request whose Host is not under a storage domain is looked up in
// DNS; when its CNAME (followed up to lookup_depth names) is under one, the request goes on
// with that name as its Host (for domain_remap after it), and Location headers of the answer
// name the client's host again. A name that resolves to nothing usable answers 400 with
// Swift's text. Answers are cached in memcached as Swift caches them ("cname-<name>", the
// target or false, for the record's TTL; 60 s for a name without a CNAME).
//
// Lookups go through the system resolver, libresolv's res_nquery(), on a state of its own read
// from /etc/resolv.conf for each lookup; Swift's `nameservers` option (ip[:port], IPv4 or
// IPv6) replaces resolv.conf's servers in that state, which is also how tests point it at a
// DNS server of their own without touching /etc/resolv.conf. res_nquery blocks (for up to
// resolv.conf's timeout and attempts), so it runs on a small pool of its own, never on a worker.
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>

#include <boost/json.hpp>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/config/config.h"
#include "common/http/headers.h"
#include "common/http/swob.h"
#include "common/io/blocking_pool.h"
#include "common/listing_format.h"
#include "common/log/log.h"
#include "proxy/limits.h"
#include "proxy/memcache.h"

namespace apus::proxy {

namespace net = boost::asio;
using common::Result;
using common::Status;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;

namespace cname_lookup {

namespace {

bool is_ipv4(const std::string& s) {
  in_addr a;
  return ::inet_pton(AF_INET, s.c_str(), &a) == 1;
}

bool is_ipv6(const std::string& s) {
  in6_addr a;
  return ::inet_pton(AF_INET6, s.c_str(), &a) == 1;
}

// DNS names compare without case and without a final dot.
bool same_name(std::string_view a, std::string_view b) {
  if (a.ends_with('.')) a.remove_suffix(1);
  if (b.ends_with('.')) b.remove_suffix(1);
  return common::http::iequals(a, b);
}

// The largest DNS message res_nquery may hand back (over TCP).
constexpr size_t kMaxReply = 65535;
// A failed lookup is not cached; a name without a CNAME is, for a minute (Swift's values).
constexpr uint32_t kNoCnameTtl = 60;

}  // namespace

Result<std::vector<Nameserver>> parse_nameservers(std::string_view value) {
  const Status bad = Status::invalid_argument(
      "Invalid cname_lookup/nameservers configuration found. All nameservers must be valid "
      "IPv4 or IPv6, followed by an optional :<integer> port.");
  std::vector<Nameserver> out;
  for (const std::string& entry : common::list_from_csv(value)) {
    // Swift's parse_socket_string(): "[v6]:port", "[v6]", "v4:port", "v4", or a bare v6.
    Nameserver ns;
    std::optional<std::string> port;
    if (entry.starts_with('[')) {
      size_t close = entry.find(']');
      if (close == std::string::npos) return bad;
      ns.ip = entry.substr(1, close - 1);
      std::string rest = entry.substr(close + 1);
      if (!rest.empty()) {
        if (rest[0] != ':') return bad;
        port = rest.substr(1);
      }
    } else if (std::count(entry.begin(), entry.end(), ':') == 1) {
      size_t colon = entry.find(':');
      ns.ip = entry.substr(0, colon);
      port = entry.substr(colon + 1);
    } else {
      ns.ip = entry;
    }
    if (!is_ipv4(ns.ip) && !is_ipv6(ns.ip)) return bad;
    if (port) {
      auto n = common::parse_python_int(*port);
      if (!n || *n < 0 || *n > 65535) return bad;
      ns.port = static_cast<uint16_t>(*n);
    }
    out.push_back(std::move(ns));
  }
  return out;
}

Answer parse_reply(std::span<const unsigned char> msg, std::string_view domain) {
  ns_msg handle;
  if (::ns_initparse(msg.data(), static_cast<int>(msg.size()), &handle) != 0) return {};
  Answer out;
  for (int i = 0; i < ns_msg_count(handle, ns_s_an); ++i) {
    ns_rr rr;
    if (::ns_parserr(&handle, ns_s_an, i, &rr) != 0) return {};
    if (ns_rr_type(rr) != ns_t_cname || !same_name(ns_rr_name(rr), domain)) continue;
    char name[NS_MAXDNAME];
    if (::ns_name_uncompress(ns_msg_base(handle), ns_msg_end(handle), ns_rr_rdata(rr), name,
                             sizeof name) < 0) {
      return {};
    }
    // The TTL of the record set is its smallest; the target is the first record's.
    if (!out.target) {
      std::string target(name);
      while (target.ends_with('.')) target.pop_back();
      out.target = std::move(target);
      out.ttl = ns_rr_ttl(rr);
    } else {
      out.ttl = std::min<uint32_t>(out.ttl, ns_rr_ttl(rr));
    }
  }
  if (!out.target) return {kNoCnameTtl, std::nullopt};  // an answer without a CNAME
  return out;
}

Answer lookup(const std::string& domain, const std::vector<Nameserver>& nameservers) {
  struct __res_state state;
  std::memset(&state, 0, sizeof state);
  if (::res_ninit(&state) != 0) {
    ::res_nclose(&state);
    return {};
  }
  if (!nameservers.empty()) {
    // glibc's res_send() keeps an IPv6 server in _u._ext.nsaddrs[] (malloc'd, freed by
    // res_nclose) with nsaddr_list[] zeroed, and an IPv4 one in nsaddr_list[]; nscount 0 in
    // _u._ext makes it take the new list.
    for (int i = 0; i < MAXNS; ++i) {
      std::free(state._u._ext.nsaddrs[i]);
      state._u._ext.nsaddrs[i] = nullptr;
    }
    state._u._ext.nscount = 0;
    int n = 0;
    for (const Nameserver& ns : nameservers) {
      if (n == MAXNS) break;
      std::memset(&state.nsaddr_list[n], 0, sizeof state.nsaddr_list[n]);
      if (is_ipv4(ns.ip)) {
        state.nsaddr_list[n].sin_family = AF_INET;
        state.nsaddr_list[n].sin_port = htons(ns.port);
        ::inet_pton(AF_INET, ns.ip.c_str(), &state.nsaddr_list[n].sin_addr);
      } else {
        auto* a6 = static_cast<sockaddr_in6*>(std::calloc(1, sizeof(sockaddr_in6)));
        if (!a6) break;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(ns.port);
        ::inet_pton(AF_INET6, ns.ip.c_str(), &a6->sin6_addr);
        state._u._ext.nsaddrs[n] = a6;
      }
      ++n;
    }
    state.nscount = n;
  }
  std::vector<unsigned char> reply(kMaxReply);
  int len = ::res_nquery(&state, domain.c_str(), ns_c_in, ns_t_cname, reply.data(),
                         static_cast<int>(reply.size()));
  const int error = state.res_h_errno;
  ::res_nclose(&state);
  if (len < 0) {
    // No such name, or no record of the type: a negative answer to cache. Anything else
    // (SERVFAIL, a timeout) is a failed lookup.
    if (error == HOST_NOT_FOUND || error == NO_DATA) return {kNoCnameTtl, std::nullopt};
    return {};
  }
  return parse_reply(std::span<const unsigned char>(reply.data(), static_cast<size_t>(len)),
                     domain);
}

}  // namespace cname_lookup

namespace {

// Threads resolving at once: a lookup waits on the network, not the CPU.
constexpr int kLookupThreads = 2;

class CnameLookup final : public Middleware {
 public:
  CnameLookup(std::vector<std::string> storage_domains, int64_t lookup_depth,
              std::vector<cname_lookup::Nameserver> nameservers)
      : storage_domains_(std::move(storage_domains)),
        lookup_depth_(lookup_depth),
        nameservers_(std::move(nameservers)),
        pool_("cname_lookup", kLookupThreads) {}

  std::optional<std::pair<std::string, std::string>> info() const override {
    return std::make_pair(std::string("cname_lookup"),
                          "{\"lookup_depth\": " + std::to_string(lookup_depth_) + "}");
  }

  net::awaitable<void> call(Exchange& ex, ProxyEnv& env, const Next& next) override {
    if (storage_domains_.empty()) co_return co_await next(ex, env);
    const Request& req = ex.request();
    // Without a Host, Swift reads SERVER_NAME: the proxy's own address, an IP.
    const auto host_header = req.headers.get("Host");
    if (!host_header) co_return co_await next(ex, env);
    const std::string requested_host(*host_header);
    std::string given = requested_host;
    std::string port;
    if (size_t colon = given.rfind(':'); colon != std::string::npos) {
      port = given.substr(colon + 1);
      given.resize(colon);
    }
    if (cname_lookup::is_ipv4(given) || cname_lookup::is_ipv6(given) || in_storage_domain(given)) {
      co_return co_await next(ex, env);
    }
    if (lookup_depth_ <= 0) {
      // Swift's loop never runs and it fails on its unset result: catch_errors' 500.
      common::http::Response r = common::http::swob_response(500);
      r.headers.set("Content-Type", "text/plain");
      r.body = "An error occurred";
      co_return co_await ex.reply(std::move(r));
    }
    std::string a_domain = given;
    std::optional<std::string> found;
    bool mapped = false;
    for (int64_t tries = 0; tries < lookup_depth_; ++tries) {
      // The cached answer: nullopt when there is none; "" for a cached false.
      std::optional<std::string> cached;
      if (env.memcache) cached = co_await cached_answer(*env.memcache, "cname-" + a_domain);
      if (cached) {
        found = *cached;
      } else {
        std::vector<cname_lookup::Nameserver> servers = nameservers_;
        std::string name = a_domain;
        cname_lookup::Answer answer = co_await pool_.call(
            [name, servers] { return cname_lookup::lookup(name, servers); });
        found = answer.target;
        const bool negative = !answer.target && answer.ttl > 0;
        if (env.memcache && answer.ttl > 0) {
          // Swift stores it under the client's name, whatever name it looked up.
          std::string json = "false";
          if (!negative) {
            json.clear();
            common::listing::append_json_string(json, *answer.target);
          }
          co_await env.memcache->set("cname-" + given, std::move(json), answer.ttl);
        }
      }
      if (!found || found->empty() || *found == a_domain) {
        found.reset();
        break;
      }
      if (in_storage_domain(*found)) {
        APUS_LOG_DEBUG("Mapped " + given + " to " + *found);
        mapped = true;
        break;
      }
      APUS_LOG_DEBUG("Following CNAME chain for  " + given + " to " + *found);
      a_domain = *found;
    }
    if (!mapped) {
      co_return co_await ex.reply(common::http::text_response(
          400, found ? "CNAME lookup failed after " + std::to_string(lookup_depth_) + " tries"
                     : std::string("CNAME lookup failed to resolve to a valid domain")));
    }
    const std::string new_host = port.empty() ? *found : *found + ":" + port;
    HeaderEditor out(ex, [requested_host, new_host](int, HeaderMap& h) {
      for (const char* name : {"Location", "Content-Location"}) {
        auto v = h.get(name);
        if (!v) continue;
        // "http[s]://<new host>[/...]" names the client's host again.
        std::string_view value = *v;
        size_t scheme = value.starts_with("http://") ? 7 : value.starts_with("https://") ? 8 : 0;
        if (scheme == 0) continue;
        std::string_view rest = value.substr(scheme);
        if (!rest.starts_with(new_host)) continue;
        std::string_view tail = rest.substr(new_host.size());
        if (!tail.empty() && (tail[0] != '/' || tail.find('\n') != std::string_view::npos)) {
          continue;
        }
        h.set(name, std::string(value.substr(0, scheme)) + requested_host + std::string(tail));
      }
    });
    out.mutable_request().headers.set("Host", new_host);
    co_await next(out, env);
  }

 private:
  bool in_storage_domain(std::string_view name) const {
    const std::string dotted = "." + std::string(name);
    for (const auto& d : storage_domains_) {
      if (dotted.ends_with(d)) return true;
    }
    return false;
  }

  // What memcached holds for `key`: nullopt for nothing (or null), "" for false or another
  // value that is not a name, else the name.
  static net::awaitable<std::optional<std::string>> cached_answer(Memcache& mc, std::string key) {
    auto json = co_await mc.get(std::move(key));
    if (!json) co_return std::nullopt;
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(*json, ec);
    if (ec || v.is_null()) co_return std::nullopt;
    if (const auto* s = v.if_string()) co_return std::string(s->data(), s->size());
    co_return std::string();
  }

  const std::vector<std::string> storage_domains_;
  const int64_t lookup_depth_;
  const std::vector<cname_lookup::Nameserver> nameservers_;
  common::io::BlockingPool pool_;
};

}  // namespace

Result<std::unique_ptr<Middleware>> make_cname_lookup(const common::Section& section,
                                                      const MiddlewareContext&) {
  auto domains = common::list_from_csv(section.get_string("storage_domain", "example.com"));
  std::vector<std::string> storage_domains;
  for (const auto& d : domains) {
    if (!d.starts_with('.')) storage_domains.push_back("." + d);
  }
  for (const auto& d : domains) {
    if (d.starts_with('.')) storage_domains.push_back(d);
  }
  int64_t depth = 1;
  if (auto v = section.get("lookup_depth")) {
    auto n = common::parse_python_int(*v);
    if (!n) return section.invalid("lookup_depth", "is not an integer");
    depth = *n;
  }
  auto nameservers = cname_lookup::parse_nameservers(section.get_string("nameservers", ""));
  if (!nameservers.ok()) return section.invalid("nameservers", nameservers.status().message());
  return std::unique_ptr<Middleware>(
      std::make_unique<CnameLookup>(std::move(storage_domains), depth, std::move(*nameservers)));
}

}  // namespace apus::proxy
