// The staticweb middleware without sockets: its pure parts (the listing pages byte for byte as
// Swift 2.30.1 renders them, hostile names escaped; sizes, CSS paths, labels, url_base and the
// redirect's Location), then the middleware on a fake cluster standing for the rest of the
// pipeline (index pages, error pages, listings, redirects, directory markers, ACLs, X-Web-Mode).
#include "proxy/staticweb.h"

#include <map>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <doctest/doctest.h>

#include "common/http/swob.h"
#include "common/http/url.h"
#include "proxy/subrequest.h"

namespace apus::proxy {
namespace {

namespace net = boost::asio;
using common::http::Exchange;
using common::http::HeaderMap;
using common::http::Request;
using common::http::Response;
namespace sw = staticweb;

// Made by running Swift 2.30.1's staticweb (Debian's python3-swift) on the same listings.
constexpr std::string_view kSubListingJson =
    R"golden([{"subdir": "d/a<b>&\"'/"}, {"subdir": "d/sub dir%/"}, {"name": "d/x<script>alert('1')</script>.html", "hash": "h", "bytes": 1536, "content_type": "Text/HTML; charset=\"utf-8\"", "last_modified": "2026-12-01T19:00:00.123456"}, {"name": "d/caf\u00e9 \u2603", "hash": "h", "bytes": 2560, "content_type": "application/x-<evil>", "last_modified": "2026-12-01T19:00:01"}, {"name": "d/big", "hash": "h", "bytes": 5368709121, "content_type": "a/b/c", "last_modified": "2026-12-01T19:00:02.5"}])golden";
constexpr std::string_view kRootListingJson =
    R"golden([{"subdir": "d/"}, {"name": "f&g", "hash": "h", "bytes": 0, "content_type": "text/plain", "last_modified": "2026-12-01T19:00:00.000000"}])golden";
constexpr std::string_view kGoldenSub =
    R"golden(<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">
<html>
 <head>
  <title>Listing of /v1/a/c/d/</title>
  <style type="text/css">
   h1 {font-size: 1em; font-weight: bold;}
   th {text-align: left; padding: 0px 1em 0px 1em;}
   td {padding: 0px 1em 0px 1em;}
   a {text-decoration: none;}
  </style>
 </head>
 <body>
  <h1 id="title">Listing of /v1/a/c/d/</h1>
  <table id="listing">
   <tr id="heading">
    <th class="colname">Name</th>
    <th class="colsize">Size</th>
    <th class="coldate">Date</th>
   </tr>
   <tr id="parent" class="item">
    <td class="colname"><a href="../">../</a></td>
    <td class="colsize">&nbsp;</td>
    <td class="coldate">&nbsp;</td>
   </tr>
   <tr class="item subdir">
    <td class="colname"><a href="a%3Cb%3E%26%22%27/">a&lt;b&gt;&amp;&quot;&#x27;/</a></td>
    <td class="colsize">&nbsp;</td>
    <td class="coldate">&nbsp;</td>
   </tr>
   <tr class="item subdir">
    <td class="colname"><a href="sub%20dir%25/">sub dir%/</a></td>
    <td class="colsize">&nbsp;</td>
    <td class="coldate">&nbsp;</td>
   </tr>
   <tr class="item type-text type-html; charset=&quot;utf-8&quot;">
    <td class="colname"><a href="x%3Cscript%3Ealert%28%271%27%29%3C/script%3E.html">x&lt;script&gt;alert(&#x27;1&#x27;)&lt;/script&gt;.html</a></td>
    <td class="colsize">2Ki</td>
    <td class="coldate">2026-12-01 19:00:00</td>
   </tr>
   <tr class="item type-application type-x-&lt;evil&gt;">
    <td class="colname"><a href="caf%C3%A9%20%E2%98%83">café ☃</a></td>
    <td class="colsize">2Ki</td>
    <td class="coldate">2026-12-01 19:00:01</td>
   </tr>
   <tr class="item type-a type-b type-c">
    <td class="colname"><a href="big">big</a></td>
    <td class="colsize">5Gi</td>
    <td class="coldate">2026-12-01 19:00:02</td>
   </tr>
  </table>
 </body>
</html>
)golden";
constexpr std::string_view kGoldenSubCss =
    R"golden(<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">
<html>
 <head>
  <title>Listing of ex&lt;am&gt;ple.com/d/</title>
  <link rel="stylesheet" type="text/css" href="../my%20css%3C%26%3E.css" />
 </head>
 <body>
  <h1 id="title">Listing of ex&lt;am&gt;ple.com/d/</h1>
  <table id="listing">
   <tr id="heading">
    <th class="colname">Name</th>
    <th class="colsize">Size</th>
    <th class="coldate">Date</th>
   </tr>
   <tr id="parent" class="item">
    <td class="colname"><a href="../">../</a></td>
    <td class="colsize">&nbsp;</td>
    <td class="coldate">&nbsp;</td>
   </tr>
   <tr class="item subdir">
    <td class="colname"><a href="a%3Cb%3E%26%22%27/">a&lt;b&gt;&amp;&quot;&#x27;/</a></td>
    <td class="colsize">&nbsp;</td>
    <td class="coldate">&nbsp;</td>
   </tr>
   <tr class="item subdir">
    <td class="colname"><a href="sub%20dir%25/">sub dir%/</a></td>
    <td class="colsize">&nbsp;</td>
    <td class="coldate">&nbsp;</td>
   </tr>
   <tr class="item type-text type-html; charset=&quot;utf-8&quot;">
    <td class="colname"><a href="x%3Cscript%3Ealert%28%271%27%29%3C/script%3E.html">x&lt;script&gt;alert(&#x27;1&#x27;)&lt;/script&gt;.html</a></td>
    <td class="colsize">2Ki</td>
    <td class="coldate">2026-12-01 19:00:00</td>
   </tr>
   <tr class="item type-application type-x-&lt;evil&gt;">
    <td class="colname"><a href="caf%C3%A9%20%E2%98%83">café ☃</a></td>
    <td class="colsize">2Ki</td>
    <td class="coldate">2026-12-01 19:00:01</td>
   </tr>
   <tr class="item type-a type-b type-c">
    <td class="colname"><a href="big">big</a></td>
    <td class="colsize">5Gi</td>
    <td class="coldate">2026-12-01 19:00:02</td>
   </tr>
  </table>
 </body>
</html>
)golden";
constexpr std::string_view kGoldenRoot =
    R"golden(<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">
<html>
 <head>
  <title>Listing of /v1/a/c/</title>
  <style type="text/css">
   h1 {font-size: 1em; font-weight: bold;}
   th {text-align: left; padding: 0px 1em 0px 1em;}
   td {padding: 0px 1em 0px 1em;}
   a {text-decoration: none;}
  </style>
 </head>
 <body>
  <h1 id="title">Listing of /v1/a/c/</h1>
  <table id="listing">
   <tr id="heading">
    <th class="colname">Name</th>
    <th class="colsize">Size</th>
    <th class="coldate">Date</th>
   </tr>
   <tr class="item subdir">
    <td class="colname"><a href="d/">d/</a></td>
    <td class="colsize">&nbsp;</td>
    <td class="coldate">&nbsp;</td>
   </tr>
   <tr class="item type-text type-plain">
    <td class="colname"><a href="f%26g">f&amp;g</a></td>
    <td class="colsize">0</td>
    <td class="coldate">2026-12-01 19:00:00</td>
   </tr>
  </table>
 </body>
</html>
)golden";
constexpr std::string_view kGoldenRootAbsCss =
    R"golden(<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">
<html>
 <head>
  <title>Listing of /v1/a/c/</title>
  <link rel="stylesheet" type="text/css" href="https://cdn.example/x%20y.css" />
 </head>
 <body>
  <h1 id="title">Listing of /v1/a/c/</h1>
  <table id="listing">
   <tr id="heading">
    <th class="colname">Name</th>
    <th class="colsize">Size</th>
    <th class="coldate">Date</th>
   </tr>
   <tr class="item subdir">
    <td class="colname"><a href="d/">d/</a></td>
    <td class="colsize">&nbsp;</td>
    <td class="coldate">&nbsp;</td>
   </tr>
   <tr class="item type-text type-plain">
    <td class="colname"><a href="f%26g">f&amp;g</a></td>
    <td class="colsize">0</td>
    <td class="coldate">2026-12-01 19:00:00</td>
   </tr>
  </table>
 </body>
</html>
)golden";
constexpr std::string_view kGoldenDisabled =
    R"golden(<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">
<html>
<head>
<title>Listing of L/d/</title>
  <style type="text/css">
   h1 {font-size: 1em; font-weight: bold;}
   p {font-size: 2}
  </style>
</head>
<body>  <h1>Web Listing Disabled</h1>   <p>The owner of this web site has disabled web listing.   <p>If you are the owner of this web site, you can enable   web listing by setting X-Container-Meta-Web-Listings.</p><h1>Index File Not Found</h1> <p>The owner of this web site has set  <b>X-Container-Meta-Web-Index: ind<ex>.html</b>.  However, this file is not found.</p> </body>
</html>
)golden";
constexpr std::string_view kGoldenDisabledCss =
    R"golden(<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">
<html>
<head>
<title>Listing of /v1/a/c/d/e/</title>
  <link rel="stylesheet" type="text/css" href="/abs.css" />
</head>
<body>  <h1>Web Listing Disabled</h1>   <p>The owner of this web site has disabled web listing.   <p>If you are the owner of this web site, you can enable   web listing by setting X-Container-Meta-Web-Listings.</p><h1>Index File Not Found</h1> <p>The owner of this web site has set  <b>X-Container-Meta-Web-Index: index.html</b>.  However, this file is not found.</p> </body>
</html>
)golden";

// ---- pure parts ------------------------------------------------------------------------------

TEST_CASE("staticweb: the listing of a pseudo-directory is Swift's, hostile names escaped") {
  auto page = sw::listing_page(kSubListingJson, "/v1/a/c/d/", "", "d/");
  REQUIRE(page);
  CHECK(*page == kGoldenSub);
  // Nothing a client named reaches the page unescaped.
  CHECK(page->find("<script>") == std::string::npos);
  CHECK(page->find("<evil>") == std::string::npos);
  CHECK(page->find("a<b>") == std::string::npos);
}

TEST_CASE("staticweb: a listing with a style sheet and a label") {
  std::string label = sw::listing_label("/v1/a/c/d/", "ex<am>ple.com");
  CHECK(label == "ex<am>ple.com/d/");
  auto page = sw::listing_page(kSubListingJson, label, "my css<&>.css", "d/");
  REQUIRE(page);
  CHECK(*page == kGoldenSubCss);
}

TEST_CASE("staticweb: the container's own listing, with a relative or an absolute style sheet") {
  auto page = sw::listing_page(kRootListingJson, "/v1/a/c/", "", "");
  REQUIRE(page);
  CHECK(*page == kGoldenRoot);
  page = sw::listing_page(kRootListingJson, "/v1/a/c/", "https://cdn.example/x y.css", "");
  REQUIRE(page);
  CHECK(*page == kGoldenRootAbsCss);
  // An empty container lists nothing, and is no error.
  page = sw::listing_page("[]", "/v1/a/c/", "", "");
  REQUIRE(page);
  CHECK(page->find("<tr class=\"item") == std::string::npos);
}

TEST_CASE("staticweb: the page of a directory when listings are off") {
  CHECK(sw::listing_disabled_page(sw::listing_label("/v1/a/c/d/", "L"), "", "d/", "ind<ex>.html") ==
        kGoldenDisabled);
  CHECK(sw::listing_disabled_page("/v1/a/c/d/e/", "/abs.css", "d/e/", "index.html") ==
        kGoldenDisabledCss);
}

TEST_CASE("staticweb: listings that are not Swift's JSON are refused") {
  CHECK(!sw::listing_page("", "/v1/a/c/", "", ""));
  CHECK(!sw::listing_page("{\"name\": \"x\"}", "/v1/a/c/", "", ""));
  CHECK(!sw::listing_page("[\"x\"]", "/v1/a/c/", "", ""));
  CHECK(!sw::listing_page("[{\"name\": \"x\"}]", "/v1/a/c/", "", ""));  // no bytes, type, date
  CHECK(!sw::listing_page("[{\"subdir\": 3}]", "/v1/a/c/", "", ""));
  CHECK(
      !sw::listing_page("[{\"name\": \"x\", \"bytes\": \"1\", \"content_type\": \"a\", "
                        "\"last_modified\": \"b\"}]",
                        "/v1/a/c/", "", ""));
  CHECK(sw::listing_has_entries("[{\"subdir\": \"d/\"}]") == std::optional<bool>(true));
  CHECK(sw::listing_has_entries("[]") == std::optional<bool>(false));
  CHECK(sw::listing_has_entries("") == std::optional<bool>(false));
  CHECK(sw::listing_has_entries("{}") == std::optional<bool>(false));
  CHECK(!sw::listing_has_entries("[").has_value());
}

TEST_CASE("staticweb: html_escape and human_readable are Python's") {
  CHECK(sw::html_escape("a&b<c>d\"e'f") == "a&amp;b&lt;c&gt;d&quot;e&#x27;f");
  CHECK(sw::html_escape("caf\xc3\xa9") == "caf\xc3\xa9");
  // From Swift's human_readable(): each step rounds half to even.
  const std::pair<double, const char*> kSizes[] = {{0, "0"},
                                                   {1, "1"},
                                                   {1023, "1023"},
                                                   {1024, "1Ki"},
                                                   {1535, "1Ki"},
                                                   {1536, "2Ki"},
                                                   {2559, "2Ki"},
                                                   {2560, "2Ki"},
                                                   {3584, "4Ki"},
                                                   {1048575, "1Mi"},
                                                   {1048576, "1Mi"},
                                                   {5368709121.0, "5Gi"},
                                                   {18446744073709551616.0, "16Ei"},
                                                   {1e30, "827181Yi"},
                                                   {-0.5, "0"}};
  for (const auto& [value, text] : kSizes) CHECK(sw::human_readable(value) == text);
}

TEST_CASE("staticweb: style sheet paths") {
  CHECK(sw::css_path("listing.css", "") == "listing.css");
  CHECK(sw::css_path("listing.css", "a/b/") == "../../listing.css");
  CHECK(sw::css_path("my css.css", "a/") == "../my%20css.css");
  CHECK(sw::css_path("/abs/x y.css", "a/") == "/abs/x%20y.css");
  CHECK(sw::css_path("http://h:1/x\".css", "a/") == "http://h:1/x%22.css");
  CHECK(sw::css_path("https://h/x.css", "") == "https://h/x.css");
}

TEST_CASE("staticweb: url_base and the redirect's Location") {
  auto base = sw::parse_url_base("http://www.example.com");
  CHECK(base.scheme == "http");
  CHECK(base.host == "www.example.com");
  base = sw::parse_url_base("https:");
  CHECK((base.scheme == "https" && base.host.empty()));
  base = sw::parse_url_base("https://");
  CHECK((base.scheme == "https" && base.host.empty()));
  base = sw::parse_url_base("//www.example.com:8080");
  CHECK((base.scheme.empty() && base.host == "www.example.com:8080"));
  base = sw::parse_url_base("HTTPS://Host:443/path?q");
  CHECK((base.scheme == "https" && base.host == "Host:443"));
  base = sw::parse_url_base("www.example.com");
  CHECK((base.scheme.empty() && base.host.empty()));
  base = sw::parse_url_base("x y://h");
  CHECK((base.scheme.empty() && base.host.empty()));

  sw::UrlBase none;
  CHECK(sw::slash_location("/v1/a/c", none, "127.0.0.1:8080", "0.0.0.0:8080") ==
        "http://127.0.0.1:8080/v1/a/c/");
  CHECK(sw::slash_location("/v1/a/c d/\xe2\x98\x83", none, "h:80", "s:1") ==
        "http://h/v1/a/c%20d/%E2%98%83/");
  CHECK(sw::slash_location("/v1/a/c", none, std::nullopt, "10.0.0.1:8080") ==
        "http://10.0.0.1:8080/v1/a/c/");
  CHECK(sw::slash_location("/v1/a/c", sw::parse_url_base("https://web.example:443"), "h", "s") ==
        "https://web.example/v1/a/c/");
  CHECK(sw::slash_location("/v1/a/c", sw::parse_url_base("https:"), "h:443", "s") ==
        "https://h/v1/a/c/");
  CHECK(sw::slash_location("/v1/a/c", sw::parse_url_base("//w:81"), "h", "s") ==
        "http://w:81/v1/a/c/");
}

TEST_CASE("staticweb: the container's web metadata, stripped") {
  HeaderMap h;
  h.set("X-Container-Meta-Web-Index", " index.html ");
  h.set("x-container-meta-web-listings-css", "l.css");
  h.set("X-Container-Meta-Web-Directory-Type", "text/directory");
  auto c = sw::web_config(h);
  CHECK(c.index == "index.html");
  CHECK(c.listings_css == "l.css");
  CHECK(c.dir_type == "text/directory");
  CHECK(c.error.empty());
  CHECK(c.listings.empty());
}

// ---- the middleware on a fake cluster --------------------------------------------------------

template <class F>
void run(F f) {
  net::io_context ioc;
  auto done = net::co_spawn(ioc, f(), net::use_future);
  ioc.run();
  done.get();
}

// One container /v1/AUTH_a/c of objects by name, answered as the proxy app answers: GET
// streamed, HEAD and errors whole, JSON listings with prefix, delimiter and limit.
struct Cluster {
  struct Object {
    std::string type;
    std::string body;
  };
  std::map<std::string, Object> objects;
  HeaderMap container;  // the container's info headers (metadata, ACL)
  std::vector<Request> seen;

  Next app() {
    return [this](Exchange& ex, ProxyEnv& env) -> net::awaitable<void> {
      const Request& req = ex.request();
      seen.push_back(req);
      std::string path = common::http::percent_decode(req.path());
      auto segs = common::http::split_path(path, 3, 4, true);
      REQUIRE(segs.ok());
      // The app authorizes as the proxy does, with the container's read ACL.
      if (auto acl = container.get("X-Container-Read")) {
        env.acl = std::string(*acl);
      } else {
        env.acl.reset();
      }
      if (env.authorize) {
        if (auto denied = co_await env.authorize(req, env)) {
          co_return co_await ex.reply(std::move(*denied));
        }
      }
      if ((*segs)[3].value_or("").empty()) co_return co_await ex.reply(listing(req));
      auto it = objects.find(*(*segs)[3]);
      if (it == objects.end()) co_return co_await ex.reply(common::http::swob_response(404));
      HeaderMap h;
      h.set("Content-Type", it->second.type);
      h.set("Etag", "\"e\"");
      if (req.method == "HEAD") {
        Response r;
        r.headers = std::move(h);
        r.headers.set("Content-Length", std::to_string(it->second.body.size()));
        co_return co_await ex.reply(std::move(r));
      }
      if (!(co_await ex.start_response(200, std::move(h), it->second.body.size())).ok()) {
        co_return;
      }
      if (!it->second.body.empty() && !(co_await ex.write_body(it->second.body)).ok()) {
        co_return;
      }
      (void)co_await ex.finish_response();
    };
  }

  Response listing(const Request& req) {
    std::string prefix = common::http::query_param(req.query(), "prefix").value_or("");
    std::string delimiter = common::http::query_param(req.query(), "delimiter").value_or("");
    size_t limit = std::stoul(common::http::query_param(req.query(), "limit").value_or("10000"));
    boost::json::array rows;
    std::string last_subdir;
    for (const auto& [name, o] : objects) {
      if (rows.size() >= limit) break;
      if (!name.starts_with(prefix)) continue;
      size_t d = delimiter.empty() ? std::string::npos : name.find(delimiter, prefix.size());
      if (d != std::string::npos) {
        std::string subdir = name.substr(0, d + 1);
        if (subdir != last_subdir) rows.push_back(boost::json::object{{"subdir", subdir}});
        last_subdir = subdir;
        continue;
      }
      rows.push_back(boost::json::object{{"name", name},
                                         {"hash", "e"},
                                         {"bytes", o.body.size()},
                                         {"content_type", o.type},
                                         {"last_modified", "2026-12-01T19:00:00.000000"}});
    }
    Response r;
    r.headers.set("Content-Type", "application/json; charset=utf-8");
    r.body = boost::json::serialize(rows);
    return r;
  }
};

struct Info final : InfoLookup {
  Cluster& cluster;
  explicit Info(Cluster& c) : cluster(c) {}
  net::awaitable<CachedInfo> account_info(const std::string&, const Request&,
                                          const ProxyEnv&) override {
    co_return CachedInfo{200, {}, {}};
  }
  net::awaitable<CachedInfo> container_info(const std::string&, const std::string& c,
                                            const Request&, const ProxyEnv&) override {
    if (c != "c") co_return CachedInfo{404, {}, {}};
    co_return CachedInfo{200, cluster.container, {}};
  }
  net::awaitable<void> forget_info(std::string, std::string, const ProxyEnv&) override {
    co_return;
  }
};

// tempauth's rule for what the tests need: a user (remote_user set) may do anything; anyone
// may read objects of a container readable by .r:*, and list it with .rlistings too.
net::awaitable<std::optional<Response>> authorize(const Request& req, ProxyEnv& env) {
  if (!env.remote_user.empty()) co_return std::nullopt;
  auto segs = common::http::split_path(common::http::percent_decode(req.path()), 3, 4, true);
  std::string acl = env.acl.value_or("");
  bool object = segs.ok() && (*segs)[3].has_value() && !(*segs)[3]->empty();
  if (acl.find(".r:*") != std::string::npos &&
      (object || acl.find(".rlistings") != std::string::npos)) {
    co_return std::nullopt;
  }
  co_return common::http::swob_response(401);
}

struct Fixture {
  Cluster cluster;
  Info info{cluster};
  std::unique_ptr<Middleware> mw;
  Next cluster_app = cluster.app();

  explicit Fixture(std::string options = "") {
    auto parsed = common::Config::parse(
        "[DEFAULT]\nbind_ip = 10.0.0.1\nbind_port = 8080\n"
        "[filter:staticweb]\nuse = egg:swift#staticweb\n" +
        options);
    REQUIRE(parsed.ok());
    common::SwiftConf swift;
    std::string dir = "/nonexistent";
    auto made =
        make_staticweb(parsed->section("filter:staticweb"), MiddlewareContext{swift, dir, info});
    REQUIRE(made.ok());
    mw = std::move(made.value());
    cluster.container.set("X-Container-Read", ".r:*,.rlistings");
    cluster.objects["index.html"] = {"text/html", "the index"};
    cluster.objects["404error.html"] = {"text/html", "not here"};
    cluster.objects["401error.html"] = {"text/html", "not you"};
    cluster.objects["dir"] = {"application/directory", ""};
    cluster.objects["dir/a <b>.txt"] = {"text/plain", "a"};
    cluster.objects["dir/sub/x"] = {"text/plain", "x"};
    cluster.objects["idx/index.html"] = {"text/html", "idx index"};
    cluster.objects["plain.txt"] = {"text/plain", "plain body"};
  }

  void meta(std::string name, std::string value) {
    cluster.container.set("X-Container-Meta-" + name, value);
  }

  // One request through the middleware and the cluster: the whole answer. `user` makes it an
  // authenticated request.
  Response call(std::string method, std::string path, HeaderMap headers = {}, std::string user = "",
                bool with_host = true) {
    Next through = [this](Exchange& ex, ProxyEnv& env) { return mw->call(ex, env, cluster_app); };
    if (with_host && !headers.contains("Host")) headers.set("Host", "example.com:8080");
    Request req = make_subrequest(std::move(method), path, "", std::move(headers));
    ProxyEnv env;
    env.authorize = authorize;
    env.remote_user = user;
    std::optional<common::Result<Response>> r;
    run([&]() -> net::awaitable<void> {
      r.emplace(co_await run_subrequest(through, std::move(req), env, 1 << 20));
    });
    REQUIRE(r->ok());
    return std::move(**r);
  }
};

TEST_CASE_FIXTURE(Fixture, "staticweb: without web metadata requests pass through") {
  Response r = call("GET", "/v1/AUTH_a/c/plain.txt");
  CHECK(r.status == 200);
  CHECK(r.body == "plain body");
  r = call("GET", "/v1/AUTH_a/c/");
  CHECK(r.status == 200);  // the app's own JSON listing
  CHECK(r.headers.get_or("Content-Type", "").starts_with("application/json"));
  r = call("GET", "/v1/AUTH_a/c/nothing");
  CHECK(r.status == 404);
  CHECK(r.body == common::http::swob_response(404).body);
  // X-Web-Mode on a container without web metadata: 404, not a listing.
  HeaderMap web;
  web.set("X-Web-Mode", "true");
  CHECK(call("GET", "/v1/AUTH_a/c/", web, "AUTH_a").status == 404);
}

TEST_CASE_FIXTURE(Fixture, "staticweb: the index of the container and of pseudo-directories") {
  meta("Web-Index", "index.html");
  Response r = call("GET", "/v1/AUTH_a/c/");
  CHECK(r.status == 200);
  CHECK(r.body == "the index");
  r = call("GET", "/v1/AUTH_a/c/idx/");
  CHECK(r.status == 200);
  CHECK(r.body == "idx index");
  CHECK(cluster.seen.back().headers.get_or("User-Agent", "") == "None StaticWeb");
  // Without the slash: redirected to it.
  r = call("GET", "/v1/AUTH_a/c/idx");
  CHECK(r.status == 301);
  CHECK(r.headers.get_or("Location", "") == "http://example.com:8080/v1/AUTH_a/c/idx/");
  r = call("GET", "/v1/AUTH_a/c");
  CHECK(r.status == 301);
  CHECK(r.headers.get_or("Location", "") == "http://example.com:8080/v1/AUTH_a/c/");
  CHECK(r.body == common::http::swob_response(301).body);
  // A directory without an index and listings off: Swift's "listing disabled" page.
  r = call("GET", "/v1/AUTH_a/c/dir/");
  CHECK(r.status == 404);
  CHECK(r.body == sw::listing_disabled_page("/v1/AUTH_a/c/dir/", "", "dir/", "index.html"));
  // An authenticated request without X-Web-Mode sees the container as it is.
  r = call("GET", "/v1/AUTH_a/c/", {}, "AUTH_a");
  CHECK(r.headers.get_or("Content-Type", "").starts_with("application/json"));
  HeaderMap web;
  web.set("X-Web-Mode", "yes");
  r = call("GET", "/v1/AUTH_a/c/", web, "AUTH_a");
  CHECK(r.body == "the index");
}

TEST_CASE_FIXTURE(Fixture, "staticweb: listings, their escaping, and what is not listed") {
  meta("Web-Listings", "true");
  Response r = call("GET", "/v1/AUTH_a/c/dir/");
  CHECK(r.status == 200);
  CHECK(r.headers.get_or("Content-Type", "") == "text/html; charset=UTF-8");
  CHECK(r.body.find("<a href=\"a%20%3Cb%3E.txt\">a &lt;b&gt;.txt</a>") != std::string::npos);
  CHECK(r.body.find("<a href=\"sub/\">sub/</a>") != std::string::npos);
  CHECK(r.body.find("<a href=\"../\">../</a>") != std::string::npos);
  CHECK(r.body.find("<b>") == std::string::npos);
  // The listing subrequest: a GET of the container for the prefix, not with the user's token.
  const Request& list = cluster.seen.back();
  CHECK(list.method == "GET");
  CHECK(list.path() == "/v1/AUTH_a/c");
  CHECK(common::http::query_param(list.query(), "prefix") == "dir/");
  CHECK(common::http::query_param(list.query(), "delimiter") == "/");
  r = call("GET", "/v1/AUTH_a/c/");
  CHECK(r.status == 200);
  CHECK(r.body.find("<a href=\"dir/\">dir/</a>") != std::string::npos);
  CHECK(r.body.find("<a href=\"plain.txt\">plain.txt</a>") != std::string::npos);
  // A prefix with nothing under it is a 404.
  r = call("GET", "/v1/AUTH_a/c/none/");
  CHECK(r.status == 404);
  CHECK(r.body == common::http::swob_response(404).body);
  // A pseudo-directory asked for without its slash is redirected only when something is in it.
  r = call("GET", "/v1/AUTH_a/c/dir/sub");
  CHECK(r.status == 301);
  CHECK(r.headers.get_or("Location", "") == "http://example.com:8080/v1/AUTH_a/c/dir/sub/");
  CHECK(call("GET", "/v1/AUTH_a/c/nothing").status == 404);
  // HEAD of a listing: the status of the GET.
  CHECK(call("HEAD", "/v1/AUTH_a/c/dir/").status == 200);
}

TEST_CASE_FIXTURE(Fixture, "staticweb: directory markers are directories, when a site is on") {
  // No web metadata: the marker is an object like any other.
  Response r = call("GET", "/v1/AUTH_a/c/dir");
  CHECK(r.status == 200);
  CHECK(r.headers.get_or("Content-Type", "") == "application/directory");
  meta("Web-Listings", "on");
  r = call("GET", "/v1/AUTH_a/c/dir");
  CHECK(r.status == 301);
  // Another directory type: the application/directory marker is an object again.
  meta("Web-Directory-Type", "text/directory");
  r = call("GET", "/v1/AUTH_a/c/dir");
  CHECK(r.status == 200);
  CHECK(r.headers.get_or("Content-Type", "") == "application/directory");
}

TEST_CASE_FIXTURE(Fixture, "staticweb: error pages keep the error's status") {
  meta("Web-Listings", "true");
  meta("Web-Error", "error.html");
  Response r = call("GET", "/v1/AUTH_a/c/nothing");
  CHECK(r.status == 404);
  CHECK(r.body == "not here");
  CHECK(r.headers.get_or("Content-Type", "") == "text/html");
  CHECK(cluster.seen.back().path() == "/v1/AUTH_a/c/404error.html");
  r = call("GET", "/v1/AUTH_a/c/none/");
  CHECK(r.status == 404);
  CHECK(r.body == "not here");
  // Without .rlistings, anonymous users may not list: 401 with its page.
  cluster.container.set("X-Container-Read", ".r:*");
  r = call("GET", "/v1/AUTH_a/c/");
  CHECK(r.status == 401);
  CHECK(r.body == "not you");
  // An error page that is not there: the error as it was.
  cluster.objects.erase("401error.html");
  r = call("GET", "/v1/AUTH_a/c/");
  CHECK(r.status == 401);
  CHECK(r.body == common::http::swob_response(401).body);
  // Errors other than 404 on an object get no page.
  cluster.container.set("X-Container-Read", "");
  r = call("GET", "/v1/AUTH_a/c/plain.txt");
  CHECK(r.status == 401);
  CHECK(r.body == common::http::swob_response(401).body);
}

TEST_CASE("staticweb: url_base makes the redirects' Location") {
  Fixture f("url_base = https://www.example.com\n");
  f.meta("Web-Listings", "true");
  Response r = f.call("GET", "/v1/AUTH_a/c");
  CHECK(r.status == 301);
  CHECK(r.headers.get_or("Location", "") == "https://www.example.com/v1/AUTH_a/c/");
  Fixture g;
  g.meta("Web-Listings", "true");
  // HTTP/1.0 without Host: the server's own address, as Swift's SERVER_NAME:SERVER_PORT.
  r = g.call("GET", "/v1/AUTH_a/c", {}, "", false);
  CHECK(r.headers.get_or("Location", "") == "http://10.0.0.1:8080/v1/AUTH_a/c/");
  // An empty Host is a Host all the same.
  HeaderMap empty;
  empty.set("Host", "");
  r = g.call("GET", "/v1/AUTH_a/c", empty);
  CHECK(r.headers.get_or("Location", "") == "http:///v1/AUTH_a/c/");
}

TEST_CASE("staticweb: a bad url_base is refused, and /info names staticweb") {
  auto parsed = common::Config::parse(
      "[filter:staticweb]\nuse = egg:swift#staticweb\n"
      "url_base = http://[::1\n");
  REQUIRE(parsed.ok());
  Cluster cluster;
  Info info{cluster};
  common::SwiftConf swift;
  std::string dir = "/nonexistent";
  CHECK(!make_staticweb(parsed->section("filter:staticweb"), MiddlewareContext{swift, dir, info})
             .ok());
  auto good = common::Config::parse("[filter:staticweb]\nuse = egg:swift#staticweb\n");
  auto made =
      make_staticweb(good->section("filter:staticweb"), MiddlewareContext{swift, dir, info});
  REQUIRE(made.ok());
  auto section = (*made)->info();
  REQUIRE(section);
  CHECK(section->first == "staticweb");
  CHECK(section->second == "{}");
}

}  // namespace
}  // namespace apus::proxy
